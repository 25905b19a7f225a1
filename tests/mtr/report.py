"""Markdown report of mtr runs (runner.RunResult) in several set-ups."""
import datetime
import os
import subprocess

from mtr import runner

SHORT = {"pass": "pass", "retry-pass": "pass", "fail": "FAIL", "retry-fail": "FAIL", "skipped": "skip",
         "disabled": "disabled"}


def _git_head(repo):
    try:
        return subprocess.run(["git", "-C", repo, "log", "-1", "--format=%h %s"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def cell(t):
    if t is None:
        return "–"
    s = SHORT.get(t.status, t.status)
    extra = []
    if t.divergences:
        extra.append(f"{t.divergences} div")
    if t.storage_failures:
        extra.append(f"{len(t.storage_failures)} storage")
    if t.elided:
        extra.append(f"{t.elided} elided")
    if t.status in ("fail", "retry-fail") or t.storage_failures or t.divergences:
        s = f"**{s}**"
    return s + (f" ({', '.join(extra)})" if extra else "")


def base_name(name):
    return name.replace(" (again)", "")


def render(runs, command, notes=""):
    """runs: RunResults of one invocation (any set-ups, any order)."""
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    keys = [r.setup.key for r in runs]
    by = {r.setup.key: r for r in runs}
    out = ["# MariaDB's mysql-test-run over the stack", "",
           f"- date: {now}",
           f"- command: `{command}`",
           f"- repository head when written: {_git_head(runner.paths.REPO)}",
           f"- MariaDB: Debian `mariadb-test` (`{runner.MTR}`)", ""]
    builds = sorted({r.build for r in runs if r.build})
    for b in builds:
        out.append(f"- build: {b}")
    if builds:
        out.append("")
    if notes:
        out += [notes, ""]
    out += ["## Set-ups", "", "| set-up | what | build |", "| --- | --- | --- |"]
    for k in keys:
        out.append(f"| {k} | {runner.SETUPS[k].title} | {by[k].build or '?'} |")
    out += ["", "## Summary", "",
            "| set-up | tests | pass | fail | skip | storage-node failure lines | divergences | pages verified "
            "identical | elided page writes | minutes | finished |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in keys:
        r = by[k]
        c = r.counts()
        fails = sum(len(t.storage_failures) for t in r.tests.values()) + len(r.outside or [])
        div = sum(t.divergences for t in r.tests.values())
        ver = (r.storage_summary or {}).get("verify", {}).get("identical") if r.storage_summary else None
        if ver is None and r.setup.verify:
            ver = sum(t.verified or 0 for t in r.tests.values())
        el = (r.catcher_total or {}).get("elided") if r.setup.catcher else None
        fin = ("yes" if r.aborted is None and r.mtr_rc is not None else f"no: {r.aborted}" if r.aborted
               else "no (running when written, or killed)")
        out.append(f"| {k} | {len(r.tests)} | {c.get('pass', 0) + c.get('retry-pass', 0)} | "
                   f"{c.get('fail', 0) + c.get('retry-fail', 0)} | {c.get('skipped', 0) + c.get('disabled', 0)} | "
                   f"{fails if r.setup.storage == 'PPL' else '–'} | {div if r.setup.verify else '–'} | "
                   f"{ver if ver is not None else '–'} | {el if el is not None else '–'} | {r.seconds / 60:.1f} | {fin} |")
    for k in keys:
        r = by[k]
        if r.stats_line:
            out += ["", f"Storage node's last stats line in set-up {k}:", "", "```", r.stats_line[-1500:], "```"]
        if r.outside:
            out += ["", f"Storage-node lines in set-up {k} not attributed to one test (after the last result of a segment, or the storage node's death):", "", "```"]
            out += [x[-400:] for x in r.outside[:10]]
            out += ["```"]
    names = []
    seen = set()
    for r in runs:
        for n in r.tests:
            b = base_name(n)
            if b not in seen:
                seen.add(b)
                names.append(b)
    # tests that pass in the baseline but not elsewhere
    base = by.get("a")
    regress = []
    for n in names:
        cells = {k: by[k].tests.get(n) for k in keys}
        bad = [k for k in keys if cells[k] is not None and not runner.verdict_ok(cells[k])]
        if bad:
            regress.append((n, cells, bad))
    out += ["", "## Failures", "",
            "Every test that failed, or during which the storage node logged a failure or a divergence, in some "
            "set-up; the reason is mtr's first line about it and the storage node's first failure line.", ""]
    if not regress:
        out.append("None.")
    else:
        out += ["| test | " + " | ".join(keys) + " | why |", "| --- | " + " | ".join("---" for _ in keys) + " | --- |"]
        for n, cells, bad in regress:
            why = []
            for k in bad:
                t = cells[k]
                w = t.reason() if t.status in ("fail", "retry-fail") else ""
                if t.storage_failures:
                    sf = t.storage_failures[0]
                    sf = sf.split(" :FSAL :", 1)[-1] if " :FSAL :" in sf else sf
                    w = (w + "; " if w else "") + "storage: " + sf[:250]
                why.append(f"{k}: {w}")
            note = ""
            if base is not None and n in base.tests and base.tests[n].status not in ("pass", "retry-pass"):
                note = " (not passing locally either)"
            out.append(f"| {n}{note} | " + " | ".join(cell(cells[k]) for k in keys) + " | "
                       + "<br>".join(x.replace("|", "\\|") for x in why) + " |")
    out += _unexplained(runs)
    out += ["", "## Every test", "", "| test | " + " | ".join(keys) + " |", "| --- | " + " | ".join("---" for _ in keys)
            + " |"]
    for n in names:
        out.append(f"| {n} | " + " | ".join(cell(by[k].tests.get(n)) for k in keys) + " |")
    out.append("")
    return "\n".join(out)


def _unexplained(runs):
    """Verify mode's page writes not compared for no known reason, by test:
    the residue that must be looked into (ppl_verify_skip_explained)."""
    rows = [(r.setup.key, t) for r in runs if r.setup.verify for t in r.tests.values() if t.unexplained]
    if not any(r.setup.verify for r in runs):
        return []
    out = ["", "## Unexplained page writes", "",
           "Page writes verify mode did not compare for a cause it counts as unexplained (log_behind, "
           "records_short, records_gone, no_base: a write ahead of its log, or records the index should hold), "
           "by the test that ran when the storage node counted them, with the storage node's first lines about "
           "them.", ""]
    if not rows:
        return out + ["None."]
    out += ["| set-up | test | unexplained | storage node |", "| --- | --- | --- | --- |"]
    for k, t in sorted(rows, key=lambda kt: -kt[1].unexplained):
        said = "<br>".join(x[:300].replace("|", "\\|") for x in (t.unexplained_lines or [])[:3])
        out.append(f"| {k} | {t.name} | {t.unexplained} | {said} |")
    return out


def write(path, runs, command, **kw):
    text = render(runs, command, **kw)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return text
