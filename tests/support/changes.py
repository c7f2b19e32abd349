"""Random window specs and changes, for the tests that reconfigure streams while events flow."""
from testbed.semantics.topology import WindowSpec
from testbed.semantics.windows import MAX_LATE_SLIDES

HOSTS = [f"h{i}" for i in range(2, 10)]


def random_window(rng, kind, lateness_cap=None):
    size, slide = rng.randint(1, 12), rng.randint(1, 12)
    window = {"kind": kind, "size": size, "slide": slide}
    if kind == "time":
        cap = MAX_LATE_SLIDES * slide if lateness_cap is None else min(MAX_LATE_SLIDES * slide, lateness_cap)
        window["lateness"] = rng.randint(0, cap)
    return window


def random_change(rng, stream, hosts=HOSTS):
    """A new window spec, a new operator list (of ``hosts``), or both; kind and origin stay."""
    w = stream.window.model_dump(exclude_none=True)
    ops = list(stream.operators)
    what = rng.choice(["window", "operators", "both"])
    if what in ("window", "both"):
        new = random_window(rng, w["kind"], lateness_cap=w.get("lateness", 0))
        if "origin" in w:
            new["origin"] = w["origin"]
        w = new
    if what in ("operators", "both"):
        ops = rng.sample(hosts, rng.randint(1, len(hosts)))
    return stream.model_copy(update={"window": WindowSpec.model_validate(w), "operators": ops})


def next_timestamp(rng, kind: str, lateness: int, newest: int) -> tuple[int, int]:
    """The next event's coordinate, and the newest so far: in order, with
    gaps for time windows, and under lateness a fifth of them late, some
    of those too late."""
    if kind == "time" and lateness and rng.random() < 0.2:
        return max(0, newest - rng.randint(0, lateness + 2)), newest
    newest += rng.choice([0, 1, 1, 2, 3, 7, 20]) if kind == "time" else 1
    return newest, newest
