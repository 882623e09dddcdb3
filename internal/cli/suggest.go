package cli

import "sort"

// suggest returns the candidates closest to s: within an edit distance of
// two, or sharing a prefix of at least three letters; nearest first.
func suggest(s string, candidates []string) []string {
	type scored struct {
		c string
		d int
	}
	var out []scored
	for _, c := range candidates {
		d := levenshtein(s, c)
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

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
