from tests.druid_qa.runner import main

raise SystemExit(main())
