"""Fails when two Bazel packages depend on each other, directly or through
others: the package graph must be acyclic (issue #13), which Bazel itself
does not enforce (it only forbids cycles between targets).

Reads `bazel query 'kind(".*", //...:*)' --output=graph --nograph:factored
--noimplicit_deps` on stdin; prints each strongly connected set of packages
with the target edges that close it, and exits 1 if there is one.
"""
import collections
import re
import sys

EDGE = re.compile(r'^\s*"(//[^"]*)" -> "(//[^"]*)"')


def package(label):
    return label[2:].split(":", 1)[0]


def cycles(graph):
    """Tarjan's strongly connected components of size > 1."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def main():
    graph = collections.defaultdict(set)
    witnesses = collections.defaultdict(list)
    edges = 0
    for line in sys.stdin:
        m = EDGE.match(line)
        if not m:
            continue
        edges += 1
        a, b = package(m.group(1)), package(m.group(2))
        if a != b:
            graph[a].add(b)
            graph.setdefault(b, set())
            witnesses[(a, b)].append(f"{m.group(1)} -> {m.group(2)}")
    if edges == 0:
        print("package_cycles: no dependency edges on stdin (was the query's output empty?)")
        return 1
    found = cycles(graph)
    for component in found:
        print("package_cycles: these packages depend on each other: " + ", ".join("//" + p for p in component))
        members = set(component)
        for (a, b), why in sorted(witnesses.items()):
            if a in members and b in members:
                print(f"  {why[0]}")
    print(f"package_cycles: {len(graph)} packages, {edges} target edges, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
