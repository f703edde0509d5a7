"""sFlow-derived packet samples (the IXP thesis' netflow data set) plus enrichment tables.

samples: ``timestamp, sample_id, srcIP, dstIP, protocol, srcPort, dstPort, ipSize`` (protocol is the IP
protocol number: 6 TCP, 17 UDP, 1 ICMP; ports 0 for ICMP). Hosts come from a fixed set of AS address
ranges (Zipf-weighted); half the samples flow client → server, half server → client.

Tables written next to the stream: ``ip_ranges.csv`` (``cidr,start_ip,end_ip,asn,as_name,country``, the
IP-range → AS table with each AS's ISO country code), ``dns.csv`` (``ip,hostname``, for the servers) and
``countries.csv`` (``code,name``, the country-code map). All depend only on the seed.
"""

from __future__ import annotations

import csv
import ipaddress
import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson

from radstack.time.intervals import format_instant
from realtime.generators.common import Emit, GeneratorOptions, Injector, weighted, zipf_weights

AS_NAMES = [
    "TRANSIT-ONE", "EUROCARRIER", "CONTENT-CDN", "CLOUDHOST", "ACCESS-DSL", "MOBILE-NET", "UNI-NET",
    "GAMING-CO", "STREAM-VIDEO", "DNS-ANYCAST", "HOSTING-EU", "CABLE-ISP", "SEARCH-CO", "SOCIAL-CO",
    "BANK-NET", "GOV-NET",
]  # fmt: skip
FIRST_OCTETS = [23, 31, 45, 62, 77, 80, 85, 91, 104, 130, 151, 176, 185, 193, 203, 212]
COUNTRIES = {"US": "United States", "DE": "Germany", "NL": "Netherlands", "FR": "France", "GB": "United Kingdom",
             "SE": "Sweden", "JP": "Japan", "BR": "Brazil"}
AS_COUNTRIES = ["US", "DE", "US", "NL", "DE", "FR", "SE", "GB", "US", "DE", "NL", "GB", "US", "US", "JP", "BR"]
SERVERS_PER_AS = 6
SERVICES = [(6, 443), (6, 80), (17, 53), (17, 443), (6, 8080), (17, 123), (6, 22), (1, 0)]
SERVICE_WEIGHTS = [55, 12, 10, 8, 4, 3, 2, 6]


class Tables:
    """The AS ranges and the server DNS names for one seed."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"netflow-tables-{seed}")
        self.ranges: list[tuple[ipaddress.IPv4Network, int, str]] = []
        for i, (octet, name) in enumerate(zip(FIRST_OCTETS, AS_NAMES, strict=True)):
            net = ipaddress.IPv4Network(f"{octet}.{rng.randrange(256)}.0.0/16")
            self.ranges.append((net, 64496 + i if i < 16 else 65000 + i, name))
        self.servers: list[list[str]] = []
        self.dns: dict[str, str] = {}
        for net, _asn, name in self.ranges:
            ips = sorted({str(net[rng.randrange(1, 255)]) for _ in range(SERVERS_PER_AS)})
            self.servers.append(ips)
            for j, ip in enumerate(ips):
                self.dns[ip] = f"srv{j + 1}.{name.lower()}.example"

    def write(self, out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        ranges = out_dir / "ip_ranges.csv"
        with open(ranges, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["cidr", "start_ip", "end_ip", "asn", "as_name", "country"])
            for (net, asn, name), country in zip(self.ranges, AS_COUNTRIES, strict=True):
                w.writerow([str(net), str(net.network_address), str(net.broadcast_address), asn, name, country])
        dns = out_dir / "dns.csv"
        with open(dns, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["ip", "hostname"])
            for ip, host in sorted(self.dns.items()):
                w.writerow([ip, host])
        countries = out_dir / "countries.csv"
        with open(countries, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["code", "name"])
            w.writerows(sorted(COUNTRIES.items()))
        return [ranges, dns, countries]

    def asn_of(self, ip: str) -> int | None:
        addr = ipaddress.IPv4Address(ip)
        return next((asn for net, asn, _ in self.ranges if addr in net), None)

    def as_name_of(self, ip: str) -> str | None:
        addr = ipaddress.IPv4Address(ip)
        return next((name for net, _, name in self.ranges if addr in net), None)

    def country_of(self, ip: str) -> str | None:
        """The name of the country of the AS holding ``ip``."""
        addr = ipaddress.IPv4Address(ip)
        return next((COUNTRIES[c] for (net, _, _), c in zip(self.ranges, AS_COUNTRIES, strict=True)
                     if addr in net), None)


def _size(rng: random.Random, protocol: int) -> int:
    if protocol == 1:
        return rng.choice([28, 64, 84])
    r = rng.random()
    if r < 0.4:
        return rng.randint(40, 60)  # ACKs / small
    if r < 0.75:
        return 1500 if protocol == 6 else rng.randint(1200, 1500)
    return rng.randint(61, 1499)


def generate(opts: GeneratorOptions, start_ms: int, tables: Tables | None = None) -> Iterator[Emit]:
    tables = tables or Tables(opts.seed)
    rng = random.Random(opts.seed)
    inj = Injector(rng, opts.duplicates, opts.late, opts.late_max_ms, opts.before_first_late)
    n_as = len(tables.ranges)
    pick_as = weighted(rng, list(range(n_as)), zipf_weights(n_as, 0.9))
    service = weighted(rng, SERVICES, [float(w) for w in SERVICE_WEIGHTS])
    step = 1000.0 / opts.sim_rate
    for i in range(opts.events):
        now = start_ms + int(i * step)
        delay = inj.late_delay_ms()
        client_net = tables.ranges[pick_as()][0]
        client = str(client_net[rng.randrange(1, 65535)])
        server = rng.choice(tables.servers[pick_as()])
        protocol, port = service()
        eph = rng.randint(32768, 60999) if protocol != 1 else 0
        if rng.random() < 0.5:
            src, dst, sport, dport = client, server, eph, port
        else:
            src, dst, sport, dport = server, client, port, eph
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        sample = {
            "timestamp": format_instant(now - delay),
            "sample_id": sid,
            "srcIP": src,
            "dstIP": dst,
            "protocol": protocol,
            "srcPort": sport,
            "dstPort": dport,
            "ipSize": _size(rng, protocol),
        }
        yield from inj.after(Emit("netflow", sid.encode(), orjson.dumps(sample), late=delay > 0))
