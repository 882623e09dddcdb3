// Package closest is the one "did you mean" rule of muster: strict decoding
// (an unknown definition field), schema checks (a path field the CRD does
// not have) and the CLI (an unknown type or definition name) all pick their
// suggestion with Closest, so a typo gets the same hint wherever it is made.
package closest

import (
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate nearest to name, or "" when none is near
// enough to be worth suggesting.
//
// Case is ignored; the candidate is returned as spelled. A candidate is near
// enough when its edit distance (Levenshtein) to name is at most
// max(2, runes(name)/3) — two slips in a short word, one per three letters
// in a long one, so the forgotten "Spec" of "podTemplatePath" still finds
// "podTemplateSpecPath" while a short word does not match everything — or
// when it starts with name and name has at least three letters: a word left
// unfinished ("pytorch" for "pytorchjob"). The nearest wins; among equally
// near ones the lexically smallest, so the answer does not depend on the
// order of candidates (callers often pass map keys).
func Closest(name string, candidates []string) string {
	lname := strings.ToLower(name)
	n := utf8.RuneCountInString(lname)
	limit := max(2, n/3)
	best, bestD := "", 0
	for _, c := range candidates {
		if c == "" {
			continue
		}
		lc := strings.ToLower(c)
		d := levenshtein(lname, lc)
		if d > limit && (n < 3 || !strings.HasPrefix(lc, lname)) {
			continue
		}
		if best == "" || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// levenshtein is the number of single-rune insertions, deletions and
// substitutions that turn a into b.
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
