#!/usr/bin/env python3
"""Checks the relative links and images of Markdown files: each target file
exists inside the repository, and a #anchor matches a heading of its target
(GitHub's slugs: lower-case, spaces to '-', punctuation other than '-' and
'_' dropped; a repeated heading gets -1, -2, ...).

  check_doc_links.py [--root DIR] PATH...

PATH is a Markdown file, or a directory searched for *.md. DIR (default:
the working directory) is the repository's root: a link may not leave it,
and a link starting with '/' starts there. Links to http://, https:// and
mailto: are skipped, as is anything inside code. Prints one line per broken
link, "file:line: link (why)", and exits 1; else a count, exit 0.
Standard library only.
"""
import argparse
import os
import re
import sys
import urllib.parse

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# The "](target)" of an inline link or image, with an optional title;
# nested ones ([![alt](img)](target)) give both targets.
INLINE = re.compile(r"\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ATTR = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.I)
HTML_ID = re.compile(r"<[a-z]+\b[^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
ATX = re.compile(r"^\s{0,3}#{1,6}(?:\s+(.*?))?\s*$")
SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
SKIPPED = ("http://", "https://", "mailto:")


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\s+#+$", "", heading.strip())                 # closing #s
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)        # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)                           # inline HTML
    text = re.sub(r"[^\w\- ]", "", text.lower())                  # \w: letters, digits and '_'
    return text.replace(" ", "-")


def prose_lines(path):
    """(line number, text, text with code spans blanked) of each line outside
    fenced code."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)
                continue
            if fence is not None:
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and \
                        not line.strip()[len(m.group(1)):].strip():
                    fence = None
                continue
            yield number, line, CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)


def anchors_of(path, cache):
    if path not in cache:
        found, seen, previous = set(), {}, ""
        for _, line, prose in prose_lines(path):
            texts = []
            m = ATX.match(line)
            if m:
                texts.append(m.group(1) or "")
            elif SETEXT.match(line) and previous.strip() and not ATX.match(previous) and \
                    not previous.lstrip().startswith(("|", ">", "-", "*", "+")):
                texts.append(previous)
            for text in texts:
                base = slug(text)
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            found.update(HTML_ID.findall(prose))
            previous = line
        cache[path] = found
    return cache[path]


def targets(line):
    for m in INLINE.finditer(line):
        yield m.group(1)
    m = REFERENCE.match(line)
    if m:
        yield m.group(1)
    yield from HTML_ATTR.findall(line)


def check(path, root, cache):
    """The broken links of one Markdown file, and how many links it has."""
    broken, count = [], 0
    for number, _, prose in prose_lines(path):
        for raw in targets(prose):
            link = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
            if not link or link.lower().startswith(SKIPPED):
                continue
            count += 1
            where, _, anchor = link.partition("#")
            where, anchor = urllib.parse.unquote(where), urllib.parse.unquote(anchor)
            if re.match(r"^[a-z][a-z0-9+.-]*:", where, re.I):
                broken.append((number, link, "not a relative link"))
                continue
            if not where:
                target = path
            elif where.startswith("/"):
                target = os.path.join(root, where.lstrip("/"))
            else:
                target = os.path.join(os.path.dirname(path), where)
            target = os.path.normpath(target)
            if os.path.relpath(os.path.abspath(target), root).split(os.sep)[0] == os.pardir:
                broken.append((number, link, "outside the repository"))
            elif not os.path.exists(target):
                broken.append((number, link, "no such file"))
            elif anchor:
                if os.path.isdir(target):
                    broken.append((number, link, "an anchor on a directory"))
                elif target.endswith(".md") and anchor not in anchors_of(target, cache):
                    broken.append((number, link, f"no heading '{anchor}' in {os.path.relpath(target)}"))
    return broken, count


def markdown_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for directory, subdirs, files in os.walk(p, followlinks=True):
                subdirs.sort()
                for name in sorted(files):
                    if name.endswith(".md"):
                        yield os.path.join(directory, name)
        elif os.path.isfile(p):
            yield p
        else:
            print(f"check_doc_links: {p}: no such file or directory", file=sys.stderr)
            sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=".", help="the repository's root (default: the working directory)")
    p.add_argument("paths", nargs="+", help="Markdown files, or directories of them")
    args = p.parse_args()
    root = os.path.abspath(args.root)
    cache, files, links, broken = {}, 0, 0, 0
    for path in markdown_files(args.paths):
        bad, count = check(os.path.normpath(path), root, cache)
        files, links, broken = files + 1, links + count, broken + len(bad)
        for number, link, why in bad:
            print(f"{os.path.normpath(path)}:{number}: {link} ({why})")
    if broken:
        print(f"check_doc_links: {broken} broken of {links} links in {files} files", file=sys.stderr)
        return 1
    print(f"check_doc_links: {links} links in {files} files, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
