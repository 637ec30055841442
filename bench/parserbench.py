"""The JVM parser alone, this checkout's against another revision's (issue 40): `trending`'s
view records parsed in a plain JVM loop (bench/jvm/ParserBench.java), one process a variant,
the variants alternated, the first rounds of each process not kept (JIT warm-up). Gives the
median nanoseconds per record of each process and the ratio of each pair.

    .venv/bin/python -m bench.parserbench --rev REV [--events 300000 --pairs 3 --rounds 10]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pyspark

from bench.workloads import generate_trending

ROOT = Path(__file__).resolve().parents[1]
WARMUP_ROUNDS = 4


def compile_classes(sources: list[Path], classpath: str, out: Path) -> Path:
    out.mkdir(parents=True)
    subprocess.run(
        [
            "javac",
            "--release",
            "17",
            "-nowarn",
            "-d",
            str(out),
            "-cp",
            classpath,
            *map(str, sources),
        ],  # fmt: skip
        check=True,
        capture_output=True,
    )
    return out


def parser_at(rev: str, spark_jars: str, work: Path) -> Path:
    """The parser's classes compiled from java/src at git revision `rev`."""
    src = work / f"src-{rev}"
    src.mkdir(parents=True)
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{rev}:java/src/slipstream/jvm/"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    for name in names:
        text = subprocess.run(
            ["git", "show", f"{rev}:java/src/slipstream/jvm/{name}"],
            cwd=ROOT, check=True, capture_output=True,
        ).stdout  # fmt: skip
        (src / name).write_bytes(text)
    return compile_classes(sorted(src.glob("*.java")), spark_jars, work / f"classes-{rev}")


def one_process(classes: Path, bench: Path, spark_jars: str, lines: Path, rounds: int) -> float:
    """The median ns/record of the rounds after the warm-up, in a fresh JVM."""
    out = subprocess.run(
        ["java", "-Xmx2g", "-cp", f"{bench}:{classes}:{spark_jars}", "ParserBench",
         str(lines), str(rounds)],
        check=True, capture_output=True, text=True,
    ).stdout.split("\n")  # fmt: skip
    per_round = [float(line.split()[1]) for line in out if line.strip()]
    return statistics.median(per_round[WARMUP_ROUNDS:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", required=True, help="the revision to compare with")
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    spark_jars = str(Path(pyspark.__file__).parent / "jars" / "*")
    with tempfile.TemporaryDirectory(prefix="parserbench-") as tmp:
        work = Path(tmp)
        generate_trending(work / "input", args.events, 2000.0, markers=False)
        here = compile_classes(
            sorted((ROOT / "java/src/slipstream/jvm").glob("*.java")), spark_jars, work / "here"
        )
        variants = {"this checkout": here, args.rev: parser_at(args.rev, spark_jars, work)}
        bench = compile_classes([ROOT / "bench/jvm/ParserBench.java"], f"{here}:{spark_jars}",
                                work / "bench")  # fmt: skip
        runs: list[dict[str, Any]] = []
        for pair in range(args.pairs):
            order = list(variants) if pair % 2 == 0 else list(variants)[::-1]
            for name in order:
                ns = one_process(variants[name], bench, spark_jars, work / "input", args.rounds)
                runs.append({"variant": name, "pair": pair, "ns_per_record": round(ns, 1)})
                print(json.dumps(runs[-1]), flush=True)
    ratios = [
        next(r for r in runs if r["pair"] == p and r["variant"] == "this checkout")["ns_per_record"]
        / next(r for r in runs if r["pair"] == p and r["variant"] == args.rev)["ns_per_record"]
        for p in range(args.pairs)
    ]
    summary = {"events": args.events, "rev": args.rev, "runs": runs,
               "this_checkout_over_rev": [round(r, 3) for r in ratios]}  # fmt: skip
    print(json.dumps({"this checkout / " + args.rev: summary["this_checkout_over_rev"]}))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
