"""Search internals for archival and recall memory: full text, vectors and rank fusion, per database vendor."""
