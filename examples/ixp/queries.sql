-- Traffic by source AS, the AS found by IP-range search at query time
SELECT LOOKUP(srcIP, 'ip_as', 'unknown') AS src_as, SUM(bytes) AS bytes
FROM netflow_ips GROUP BY 1 ORDER BY 2 DESC;

-- Traffic by destination country: IP range -> country code -> country name
SELECT LOOKUP(LOOKUP(dstIP, 'ip_country'), 'country_name') AS dst_country, SUM(bytes) AS bytes
FROM netflow_ips GROUP BY 1 ORDER BY 2 DESC;

-- The busiest servers by name
SELECT LOOKUP(dstIP, 'dns') AS server, SUM("count") AS samples
FROM netflow_ips WHERE LOOKUP(dstIP, 'dns') IS NOT NULL GROUP BY 1 ORDER BY 2 DESC LIMIT 10;
