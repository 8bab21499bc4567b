"""kernels/attention_walk.py: the persistent causal walk visits every tile once."""


def test_causal_tail_walk_takes_every_tile_once():
    """The persistent causal walk with ``TAIL``, evaluated on the host the way the kernel computes it
    (pairs round robin before ``causal_tail``'s ``S0``, then the tail's tiles by rank): every (query tile,
    head, batch) exactly once, for even and odd query-tile counts and CTA counts that do and do not divide
    the pairs."""
    import collections

    from kernels.attention_walk import causal_tail

    for B, H, MT, units in [(2, 3, 3, 5), (2, 2, 5, 3), (1, 4, 4, 3), (1, 2, 4, 3), (32, 16, 8, 132), (2, 16, 128, 132),
                            (3, 5, 7, 11)]:
        NP = -(-MT // 2)
        S0, n = causal_tail(MT, H, B, units)
        assert S0 % NP == 0 and S0 + n * NP == NP * H * B
        seen = collections.Counter()
        for u in range(units):
            heads = max(0, -(-(S0 - u) // units))
            full, rem = MT * n // units, MT * n % units
            steps = 2 * heads + full + ((u if full % 2 == 0 else units - 1 - u) < rem)
            for t in range(steps):
                if t < 2 * heads:
                    pair = u + t // 2 * units
                    j = pair % NP
                    mt = MT - 1 - j if t % 2 == 0 else j
                    if t % 2 and MT - 1 - 2 * j == 0:
                        continue            # the lone middle pair's missing second tile
                else:
                    ts = t - 2 * heads
                    r = ts * units + (u if ts % 2 == 0 else units - 1 - u)
                    mt = MT - 1 - r // n
                    pair = S0 + r % n * NP + min(mt, MT - 1 - mt)
                seen[(pair // NP, mt)] += 1
        assert len(seen) == MT * H * B and set(seen.values()) == {1}, (B, H, MT, units)
