"""Instructions a Gratia record costs the collector: the form decoded and the envelope converted.

CPU seconds on this shared machine vary by more than the changes worth making to the
conversion; instructions do not. This runs a worker under ``valgrind --tool=callgrind`` twice,
converting 6 and then 2 envelopes of 500 distinct records (benchmarks/bench_gratia.py's,
form-encoded as gratia-probe posts them), with the collector's heap and garbage-collector
settings (collector/server/serve.py), and divides the difference by 2,000 records: start,
imports and the envelopes' making cancel out. ``--stage`` counts one part alone (``form``:
``decode_rmi``; ``parse``: ``parse_xml``; ``raw``: the ``RawXML`` strings; ``fields``:
``record_fields``; ``doc``: ``raw_doc``, the id, dating and ``CoreHours``); each part's input
is made for every envelope before counting, whatever the number counted.

Run: ``python benchmarks/bench_gratia_instructions.py [--stage all|form|parse|raw|fields|doc]``
(needs valgrind, ``apt-get install valgrind``, and ../shared; two to three minutes a stage).
Prints the count; no target, no verdict: it tells changes apart. Exit 2 when it cannot measure.
"""

from __future__ import annotations

import argparse
import gc
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STAGES = ("all", "form", "parse", "raw", "fields", "doc")
RECORDS = 500
MORE, FEWER = 6, 2


def worker(stage: str, envelopes: int) -> None:
    from benchmarks.bench_gratia import distinct_records, envelope
    from collector.gratia import envelope_docs
    from collector.gratia.rawdoc import raw_doc
    from collector.gratia.safexml import inner_xml, parse_xml
    from collector.gratia.usagerecord import record_fields
    from collector.gratia.wire import decode_rmi
    from collector.server import app  # noqa: F401  the collector's heap
    from collector.server.serve import GC_THRESHOLDS

    records = distinct_records(RECORDS * (MORE + 1))
    bodies = []
    for k in range(MORE + 1):
        xml = envelope(records[k * RECORDS : (k + 1) * RECORDS])
        fields = [("command", "multiupdate"), ("arg1", xml.decode()), ("from", "condor:bench")]
        bodies.append(urlencode(fields).encode())
    xmls = [decode_rmi(body).xml.encode() for body in bodies]
    documents = [parse_xml(xml) for xml in xmls]
    raws = [[f"<{e.tag}>{inner_xml(d, e).decode()}</{e.tag}>" for e in d.root] for d in documents]
    made = [
        [record_fields(e, r) for e, r in zip(d.root, rs, strict=True)] for d, rs in zip(documents, raws, strict=True)
    ]
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)

    def run(k: int) -> None:
        if stage == "all":
            request = decode_rmi(bodies[k])
            envelope_docs(request.xml.encode(), probe=request.probe)
        elif stage == "form":
            decode_rmi(bodies[k])
        elif stage == "parse":
            parse_xml(xmls[k])
        elif stage == "raw":
            [f"<{e.tag}>{inner_xml(documents[k], e).decode()}</{e.tag}>" for e in documents[k].root]
        elif stage == "fields":
            [record_fields(e, r) for e, r in zip(documents[k].root, raws[k], strict=True)]
        else:
            [raw_doc(dict(f), probe="p") for f in made[k]]

    run(0)  # the caches of names and plans, as in a collector that has seen an envelope
    for k in range(1, 1 + envelopes):
        run(k)


def count(stage: str, envelopes: int) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--worker", str(envelopes), "--stage", stage],
        capture_output=True, text=True,
    )  # fmt: skip
    found = re.search(r"Collected : ([0-9]+)", out.stderr)
    if out.returncode or found is None:
        raise SystemExit(f"the worker failed or callgrind printed no count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=STAGES, default="all")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.stage, args.worker)
        return 0
    from benchmarks.bench_gratia import GRACC

    if not GRACC.is_dir():
        print(f"cannot measure: needs GRACC's records in {GRACC} (../shared beside the project)", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("cannot measure: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    per_record = (count(args.stage, MORE) - count(args.stage, FEWER)) / ((MORE - FEWER) * RECORDS)
    print(f"{args.stage}: {per_record / 1000:,.0f}k instructions a record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
