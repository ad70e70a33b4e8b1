"""Tables, machine facts, py-spy profile summaries and the RESULTS.md section of
bench/queue_server.py (the measuring lives in queue_server_measure.py; this only presents it)."""
from __future__ import annotations

import datetime as _dt
import os
import platform
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import peers
import seed_test

if TYPE_CHECKING:  # bench/queue_server.py runs as a script with bench/ on sys.path
    from queue_server_measure import Bench


@dataclass
class Row:
    metric: str
    ours: float | None
    peer: float | None
    ratio: float | None
    ratio_of: str
    target: str
    result: str
    unit: str = "/s"
    note: str = ""


# ------------------------------------------------------------------ profile

def top_functions(path: str, n: int, title: str) -> str:
    """Top n functions by own (leaf) samples and by inclusive samples."""
    self_c: dict[str, int] = defaultdict(int)
    incl_c: dict[str, int] = defaultdict(int)
    total = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, cnt = line.rpartition(" ")
            try:
                k = int(cnt)
            except ValueError:
                continue
            frames = [_frame_name(fr) for fr in stack.split(";") if fr]
            frames = [fr for fr in frames if not fr.startswith("process ") and
                      not fr.startswith("thread ")]
            if not frames:
                continue
            total += k
            self_c[frames[-1]] += k
            for fr in set(frames):
                incl_c[fr] += k
    if not total:
        return f"{title}: no samples"
    out = [f"{title}; {total} samples",
           f"{'own %':>6} {'incl %':>7}  function (file)"]
    for name, k in sorted(self_c.items(), key=lambda kv: -kv[1])[:n]:
        out.append(f"{100 * k / total:6.1f} {100 * incl_c[name] / total:7.1f}  {name}")
    out.append("top by inclusive time:")
    skip = {"<module>", "main", "run", "run_forever", "_run_once", "_run", "run_until_complete"}
    shown = 0
    for name, k in sorted(incl_c.items(), key=lambda kv: -kv[1]):
        if name.split(" ")[0].rsplit(".", 1)[-1] in skip:
            continue
        out.append(f"{100 * self_c.get(name, 0) / total:6.1f} {100 * k / total:7.1f}  {name}")
        shown += 1
        if shown >= n:
            break
    return "\n".join(out)


def _frame_name(fr: str) -> str:
    """`func (path/to/file.py:123)` -> `func (to/file.py)`."""
    fr = fr.strip()
    if fr.endswith(")") and " (" in fr:
        func, _, loc = fr.rpartition(" (")
        loc = loc[:-1].rsplit(":", 1)[0]
        parts = loc.split("/")
        loc = "/".join(parts[-2:])
        return f"{func} ({loc})"
    return fr


# ------------------------------------------------------------------ report

def fmt(v: float | None, unit: str = "/s") -> str:
    if v is None:
        return "-"
    if unit == "B":
        return f"{v:,.0f} B"
    return f"{v:,.0f}"


def build_rows(b: Bench) -> list[Row]:
    a = b.args
    rows: list[Row] = []
    m = b.med

    def vs(metric: str, ok: str, pk: str | None, tgt: float | None, note: str = "") -> None:
        o, p = m(ok), (m(pk) if pk else None)
        ratio = b.ratio(ok, pk) if pk else None
        if tgt is None:
            res = "info"
        elif ratio is None:
            res = "n/a"
        else:
            res = "PASS" if ratio >= tgt else "FAIL"
        rows.append(Row(metric, o, p, ratio, "vs beanstalkd",
                        f">= {tgt:g}x" if tgt is not None else "-", res, note=note))

    def deep(metric: str, ok: str, pk: str | None) -> None:
        o = m(ok + "_deep")
        p = m(pk + "_deep") if pk else None
        p0 = m(pk) if pk else None
        ratio = b.ratio(ok + "_deep", ok)
        res = "n/a" if ratio is None else ("PASS" if ratio >= 0.8 else "FAIL")
        note = []
        if p and p0 and pk:
            note.append(f"beanstalkd deep/empty {b.ratio(pk + '_deep', pk):.2f}")
        if o and p and pk:
            note.append(f"ours/beanstalkd deep {b.ratio(ok + '_deep', pk + '_deep'):.2f}x")
        rows.append(Row(f"{metric} @ {a.depth:,} queued", o, p, ratio, "ours deep/empty",
                        ">= 0.8x", res, note="; ".join(note)))

    c = a.clients
    vs("PUT, one round trip (fsync never)", "ours_put_rt", "bs_put_rt", 1.0)
    vs("GET+DONE jobs, one round trip each (fsync never)", "ours_gd_rt", "bs_rd_rt", 1.0,
       "beanstalkd: reserve-with-timeout 0 + delete")
    floor_note = "bench/floor_server.py: uvloop, no store, no log; ours at {:.2f}x of it"
    if m("floor_put_rt"):
        vs("floor: PUT round trip, Python server doing nothing", "floor_put_rt", "bs_put_rt",
           None, floor_note.format(b.ratio("ours_put_rt", "floor_put_rt") or 0))
        vs("floor: GET+DONE round trips, Python server doing nothing", "floor_gd_rt", "bs_rd_rt",
           None, floor_note.format(b.ratio("ours_gd_rt", "floor_gd_rt") or 0))
    vs("PUT, one round trip (ours fsync always)", "ours_always_put_rt", "bs_put_rt", None,
       "beanstalkd in memory")
    vs("PUT, one round trip, both durable", "ours_always_put_rt", "bs_f0_put_rt", None,
       "beanstalkd -b DIR -f 0")
    vs("GET+DONE one round trip, both durable", "ours_always_gd_rt", "bs_f0_rd_rt", None,
       "beanstalkd -b DIR -f 0; a quarter of --jobs per run")
    vs("PUT pipelined 1,000 at a time", "ours_put_pipe", "bs_put_pipe", 0.5)
    vs("GET COUNT 100 x10 pipelined + DONE 100 ids, jobs", "ours_batch10", "bs_rd_pipe", 1.0,
       "1,000 jobs per round trip on both sides; beanstalkd pipelined reserve+delete 1,000")
    vs("GET COUNT 100 + DONE 100 ids, one batch per round trip", "ours_batch1", "bs_rd_pipe", 1.0,
       "ours 100 jobs per round trip vs beanstalkd 1,000")
    vs(f"fsync always, {c} connections, acked PUT", "ours_always_conc", "bs_f0_conc", 5.0,
       f"one process, {c} sockets on epoll, one PUT in flight each; beanstalkd -b DIR -f 0")
    vs("PUT pipelined 1,000, both durable", "ours_always_put_pipe", "bs_f0_put_pipe", None,
       "beanstalkd -b DIR -f 0 (PEERS.md: 7,800/s)")
    if "depth" in a.sections:
        deep("PUT, one round trip (never)", "ours_put_rt", "bs_put_rt")
        deep("GET+DONE, one round trip (never)", "ours_gd_rt", "bs_rd_rt")
        deep("PUT pipelined 1,000", "ours_put_pipe", "bs_put_pipe")
        deep("GET COUNT 100 x10 + DONE", "ours_batch10", "bs_rd_pipe")
        deep("GET COUNT 100 + DONE, 1 batch/RT", "ours_batch1", "bs_rd_pipe")
        deep("PUT, one round trip (always)", "ours_always_put_rt", "bs_f0_put_rt")
        deep(f"fsync always, {c} connections PUT", "ours_always_conc", "bs_f0_conc")
        deep("PUT pipelined 1,000 (always)", "ours_always_put_pipe", "bs_f0_put_pipe")
        v = b.values
        d = a.depth

        def per_job(who: str, key: str) -> float | None:
            f, e = v.get(f"mem_{who}_full_{key}"), v.get(f"mem_{who}_empty_{key}")
            if f is None or e is None:
                return None
            return (f - e) * 1024 / d - 32

        for key in ("VmRSS", "Pss"):
            o, p = per_job("ours", key), per_job("bs", key)
            res = "n/a" if o is None else ("PASS" if o < 300 else "FAIL")
            note = ""
            if o is not None:
                note = (f"ours {v['mem_ours_empty_' + key] / 1024:,.1f} -> "
                        f"{v['mem_ours_full_' + key] / 1024:,.1f} MiB")
            if p is not None:
                note += (f"; beanstalkd {v['mem_bs_empty_' + key] / 1024:,.1f} -> "
                         f"{v['mem_bs_full_' + key] / 1024:,.1f} MiB")
            rows.append(Row(f"memory per queued job beyond 32 B payload ({key})", o, p,
                            (o / p if (o is not None and p) else None), "ours/beanstalkd",
                            "< 300 B", res, unit="B", note=note))
    so, sb = b.seed.get("ours"), b.seed.get("bs")
    if so or sb:
        man = seed_test.MANUAL["linked"]
        for kind, attr, mk in (("adds", "put_rate", "put"), ("takes+DONE", "get_rate", "get")):
            o = getattr(so, attr) if so else None
            p = getattr(sb, attr) if sb else None
            note = f"sockPQd manual: {man[mk]:,.0f}/s"
            if o:
                note += f" (ours {o / man[mk]:.1f}x that)"
            rows.append(Row(f"seed test: {kind}/s, {so.rounds if so else sb.rounds} x "
                            f"{so.per_round if so else sb.per_round:,}",
                            o, p, (o / p if (o and p) else None), "vs beanstalkd", "-", "info",
                            note=note))
    return rows


def render_table(rows: list[Row], markdown: bool) -> str:
    head = ["metric", "ours", "beanstalkd", "ratio", "ratio of", "target", "result", "note"]
    body = []
    for r in rows:
        body.append([r.metric, fmt(r.ours, r.unit), fmt(r.peer, r.unit),
                     f"{r.ratio:.2f}x" if r.ratio is not None else "-", r.ratio_of, r.target,
                     r.result, r.note])
    if markdown:
        out = ["| " + " | ".join(head) + " |",
               "| --- | ---: | ---: | ---: | --- | --- | --- | --- |"]
        out += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in body]
        return "\n".join(out)
    cols = head[:-1]
    widths = [max(len(cols[i]), *(len(row[i]) for row in body)) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in body:
        line = "  ".join(x.ljust(w) if i in (0, 4, 5, 6) else x.rjust(w)
                         for i, (x, w) in enumerate(zip(row[:-1], widths, strict=True)))
        lines.append(line + (f"  # {row[-1]}" if row[-1] else ""))
    return "\n".join(lines)


def machine_info() -> dict[str, str]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", str(peers.REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    return {
        "uname": " ".join(platform.uname()),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": mem,
        "python": sys.version.split()[0],
        "commit": commit,
    }


def samples_detail(b: Bench) -> str:
    lines = []
    for k in sorted(b.samples):
        v = b.samples[k]
        lines.append(f"{k}: median {statistics.median(v):,.0f}  runs "
                     + ", ".join(f"{x:,.0f}" for x in v))
    return "\n".join(lines)


def write_results(b: Bench, rows: list[Row], info: dict[str, str], path: Path,
                  cmdline: str, load_note: str, elapsed: float) -> None:
    a = b.args
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    bs_ver = peers.beanstalkd_version(b.bs_path) if b.bs_path else "not installed (skipped)"
    parts = [
        f"## {now}{' (quick smoke run)' if a.quick else ''}",
        "",
        f"- machine: `{info['uname']}`; CPU {info['cpu']}, {info['cores']} cores, {info['memory']}",
        f"- {load_note}",
        (f"- Python {info['python']}, server code {b.values_str.get('code', info['commit'])}, "
         f"{bs_ver}; data dirs on "
         f"{b.values_str.get('fs_type', '?')} (an fsync on this VM costs about 0.1 ms: durable "
         "figures look better here than on disks that really flush)"),
        (f"- method: one Python client process on loopback, raw sockets, the same client code for "
         f"both servers (bench/rawclient.py), {a.jobs:,} jobs of 32 bytes per run, median of "
         f"{a.reps} runs; ratios are medians of per-rep ratios; the servers (ours and beanstalkd, "
         f"empty and with {a.depth:,} jobs preloaded by pipelined PUT in the measured queue) "
         f"run side by side and each rep goes round all of them; {a.clients} concurrent "
         f"connections = one process, {a.clients} sockets on epoll, one PUT in flight each"),
        f"- command: `{cmdline}` ({elapsed / 60:.1f} min)",
        "",
        render_table(rows, markdown=True),
        "",
    ]
    if b.notes:
        parts += [f"- note: {n}" for n in b.notes] + [""]
    if b.errors:
        parts += ["Errors:", ""] + [f"- {e}" for e in b.errors] + [""]
    for r in b.seed.values():
        parts += [f"Seed test per round ({r.server}, {r.summary().split(': ', 1)[1]}):", "",
                  r.table(), ""]
    if b.profile:
        parts += ["Profile of our server (py-spy, --nonblocking, 250 Hz):", ""]
        for txt in b.profile.values():
            parts += ["```", txt, "```", ""]
    parts += ["<details><summary>all runs (jobs/s)</summary>", "", "```", samples_detail(b),
              "```", "", "</details>", ""]
    text = "\n".join(parts)
    if path.exists():
        old = path.read_text()
    else:
        old = ("# Queue server benchmark results\n\n"
               "Written by `bench/queue_server.py --write-results`; newest section first.\n"
               "Targets: the brief of the bench work (round trip >= 1.0x beanstalkd, pipelined PUT "
               ">= 0.5x, batched GET >= 1.0x, durable concurrent PUT >= 5x beanstalkd -f 0, "
               "rates at depth >= 0.8x empty, < 300 B per queued job beyond the payload).\n\n")
    marker = "\n## "
    i = old.find(marker)
    new = (old[:i + 1] + text + "\n" + old[i + 1:]) if i >= 0 else (old.rstrip("\n") + "\n\n" + text)
    path.write_text(new)
