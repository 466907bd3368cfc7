"""Everything PromQL: the vocabulary it is spelt in, the catalogue written in it, user PromQL read, checked.

* `expressions`: the one PromQL vocabulary (`selector`, `series`, `rate`, `aggregate`, histogram statistics).
* `strings`: string literals and regular expressions a caller's value cannot escape from.
* `catalogue`: the catalogue's metrics written in it (`value_query`, `served_query`, `presence_query`).
* `combined`: the adapter's one query per refresh.
* `parse`: user PromQL read with a real parser; `check`: user PromQL must `rate()` its counters.

The package itself imports nothing: `adapter.vocabulary.selectors` reads `strings`, and `expressions` reads
the selectors, so a re-export here would be an import cycle.
"""
