"""Berth's CPU samples (``sitecustomize.py`` beside this) grouped by what the code does.

    python hack/cpu-sample/report.py SAMPLES [FROM TO]

Without a window, the seconds where bindings were sent are found and printed; with one
(seconds since ``berth run`` started), the samples in it are grouped and printed as shares.
"""

from __future__ import annotations

import collections
import pickle
import sys

# First match wins: (group, any of these frame names).
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scheduling session (worker thread)", ("[session thread]",)),
    ("TLS handshakes", ("do_handshake ",)),
    ("binding requests", ("bind (kube/binder/binding.py)",)),
    ("Events", ("_work (kube/transport/events.py)",)),
    ("informer: ClusterCache.add_pod", ("add_pod (scheduler/snapshot/cache.py)",)),
    ("informer: Admission.observe_pod", ("observe_pod (kube/admission/admission.py)",)),
    ("informer: JSON decoding", ("_event (kube/transport/watching.py)",)),
    ("informer: the rest", ("_follow (kube/informers/list_watch.py)",)),
    ("loop: snapshot", ("snapshot (operator/scheduling.py)",)),
    ("loop: on_result (metrics, writers)", ("on_result (operator/scheduling.py)",)),
    ("loop: the rest (thread hop, sink)", ("run_loop (operator/scheduling.py)",)),
    ("socket reads (TLS, HTTP parsing)", ("_read_ready (asyncio/selector_events.py)",)),
    ("request bodies written", ("write_bytes (aiohttp/client_reqrep.py)",)),
    ("status writers", ("statuses.py)",)),
    ("Kopf", ("(kopf/",)),
    ("event loop idle (CPU elsewhere)", ("select (selectors.py)",)),
)


def _group(stack: tuple[str, ...]) -> str:
    for name, marks in _GROUPS:
        if any(mark in frame for frame in stack for mark in marks):
            return name
    return "other"


def main() -> None:
    with open(sys.argv[1], "rb") as fh:
        counts: dict[tuple[int, tuple[str, ...]], int] = pickle.load(fh)
    if len(sys.argv) < 4:
        binding = sorted({s for (s, stack) in counts if any("_bind (" in f for f in stack)})
        print("seconds with bindings:", " ".join(map(str, binding)))
        return
    low, high = int(sys.argv[2]), int(sys.argv[3])
    groups: collections.Counter[str] = collections.Counter()
    for (second, stack), n in counts.items():
        if low <= second < high:
            groups[_group(stack)] += n
    total = sum(groups.values())
    print(f"{total} samples in [{low}, {high})")
    for name, n in groups.most_common():
        print(f"{100 * n / total:5.1f} %  {name}")


if __name__ == "__main__":
    main()
