package cli

import "github.com/muster-io/muster/internal/closest"

// suggest returns the known spelling to offer for an unknown type or
// definition name s: none, or the one closest.Closest picks, so the CLI
// hints by the same rule as decoding and schema checks.
func suggest(s string, candidates []string) []string {
	if c := closest.Closest(s, candidates); c != "" {
		return []string{c}
	}
	return nil
}
