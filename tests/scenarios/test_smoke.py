"""A first end-to-end check that the builders and the simulator fit together."""

from builders import binds, node, pod, podgroup, scenario


def test_a_gang_that_fits_is_bound_whole() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=2, min_resources={"cpu": "2"}),
            pod("a", group="pg"),
            pod("b", group="pg"),
        ]
    )
    assert binds(sim) == {"default/a": "n1", "default/b": "n1"}
