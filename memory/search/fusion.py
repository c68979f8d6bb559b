"""Reciprocal rank fusion: merge rankings from different retrievers without comparing their scores."""

# The constant from Cormack et al. (2009); it damps the weight of the very top ranks.
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: dict[str, list[str]], *, k: int = RRF_K
) -> list[tuple[str, float, tuple[str, ...]]]:
    """(id, fused score, names of the rankings it appeared in), best first; ties keep first-seen order."""
    scores: dict[str, float] = {}
    sources: dict[str, list[str]] = {}
    for name, ids in rankings.items():
        for rank, item in enumerate(ids):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank + 1)
            sources.setdefault(item, []).append(name)
    ordered = sorted(scores, key=lambda item: -scores[item])
    return [(item, scores[item], tuple(sources[item])) for item in ordered]
