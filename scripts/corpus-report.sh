#!/bin/sh
# The real-log corpus's report (collectors/tests/corpus): stages every excerpt, prints the
# per-collector precision and recall, the misses and the excerpts pending a collector, and
# fails as the test does. The table in docs/corpus.md is this command's output.
set -eu
cd "$(dirname "$0")/.."
exec cargo test -p collectors --test corpus -- --nocapture --test-threads=1 the_corpus_scores_above_the_bars
