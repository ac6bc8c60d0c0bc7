#!/usr/bin/env python3
"""Counts the production functions of src/ by length, tests left out, and the
library's `-> Result<_, String>` (src/cli, src/commands and src/main.rs are the binary).

A function's length is its lines from `fn` to its closing brace. Test code is every
file declared under `#[cfg(test)]` (and what it declares) and every item marked
`#[cfg(test)]` inside a production file.

    tools/long_fns.py [--over 80] [--list] [ROOT]
"""
import argparse
import os
import re
import sys


def strip(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 20]) and not re.match(r"\w", text[i - 1] if i else " "):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(code, i):
    """Index after the brace block that opens at or after `i`, or of a `;` first."""
    depth = 0
    while i < len(code):
        c = code[i]
        if c == ";" and depth == 0:
            return i + 1
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


STRING_ERROR = re.compile(r"->\s*Result<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*?,\s*String\s*>")
CFG_TEST = re.compile(r"#\[cfg\((all\()?test\b[^\]]*\]")


def analyse(path, code, test_files):
    """(name, line, length) of each production function; marks test child files."""
    blanked = list(code)
    for m in CFG_TEST.finditer(code):
        j = m.end()
        item = re.match(r"(\s*#\[[^\]]*\])*\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[j:])
        if item:
            attrs = code[j:j + item.end()]
            p = re.search(r'#\[path\s*=\s*"([^"]+)"\]', attrs)
            test_files.add(child(path, item.group(4), p.group(1) if p else None))
        end = block_end(code, j)
        for k in range(m.start(), end):
            if blanked[k] != "\n":
                blanked[k] = " "
    code = "".join(blanked)
    found = []
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        end = block_end(code, m.end())
        if code[end - 1] != "}":
            continue
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end - 1) + 1
        found.append((m.group(1), first, last - first + 1))
    return found


def child(path, name, explicit):
    d = os.path.dirname(path)
    base = os.path.basename(path)
    if explicit:
        return os.path.normpath(os.path.join(d, explicit))
    if base not in ("mod.rs", "lib.rs", "main.rs"):
        d = os.path.join(d, base[:-3])
    for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    return os.path.normpath(os.path.join(d, name + ".rs"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--over", type=int, default=80)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("root", nargs="?", default="src")
    a = ap.parse_args()
    files = sorted(
        os.path.normpath(os.path.join(d, f))
        for d, _, fs in os.walk(a.root) for f in fs if f.endswith(".rs")
    )
    test_files, results = set(), {}
    # Parents before children: a test module's own children are test code too.
    for path in sorted(files, key=lambda p: (p.count(os.sep), p)):
        code = strip(open(path, encoding="utf-8").read())
        results[path] = analyse(path, code, test_files)
        if path in test_files:
            for m in re.finditer(r"(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code):
                test_files.add(child(path, m.group(3), None))
    rows = sorted(
        ((n, p, name, line) for p, fs in results.items() if p not in test_files
         for name, line, n in fs),
        reverse=True,
    )
    over = [r for r in rows if r[0] > a.over]
    if a.list:
        for n, p, name, line in over:
            print(f"{n:5} {p}:{line} {name}")
    longest = rows[0] if rows else (0, "-", "-", 0)
    binary = tuple(os.path.join(a.root, b) for b in ("cli", "commands", "main.rs"))
    string_errors = sum(
        len(STRING_ERROR.findall(strip(open(p, encoding="utf-8").read())))
        for p in results if p not in test_files and not p.startswith(binary)
    )
    print(f"production functions: {len(rows)}; over {a.over} lines: {len(over)}; "
          f"over 150: {sum(1 for r in rows if r[0] > 150)}; "
          f"longest: {longest[0]} ({longest[1]}:{longest[3]} {longest[2]})")
    print(f"library functions returning Result<_, String>: {string_errors}")


if __name__ == "__main__":
    sys.exit(main())
