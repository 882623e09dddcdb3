package cli

import (
	"sort"

	"github.com/muster-io/muster/internal/closest"
)

// suggest returns the candidates closest to s: within an edit distance of
// two, or sharing a prefix of at least three letters; nearest first.
func suggest(s string, candidates []string) []string {
	type scored struct {
		c string
		d int
	}
	var out []scored
	for _, c := range candidates {
		d := closest.Levenshtein(s, c)
		if d <= 2 || (len(s) >= 3 && len(c) >= len(s) && c[:len(s)] == s) {
			out = append(out, scored{c, d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].c < out[j].c
	})
	res := make([]string, len(out))
	for i, o := range out {
		res[i] = o.c
	}
	return res
}
