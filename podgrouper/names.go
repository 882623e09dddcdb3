package podgrouper

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxNameLength is 63 although a PodGroup's name may be a DNS subdomain of
// up to 253 characters: every member pod carries the name as the value of
// the label scheduling.x-k8s.io/pod-group, and a label value is at most 63
// characters. A longer name could be created but never pointed at.
const maxNameLength = 63

// hashLength is the number of hex digits of the identity hash appended when a
// name is cut or had to be rewritten. 8 digits (32 bits) make a collision
// between two gangs of one namespace negligible.
const hashLength = 8

// podGroupName returns the PodGroup name of one gang instance: readable and
// deterministic from the workload name, the gang definition and the group
// keys. A whole-workload gang that is the definition's only gang (or is named
// after the root component) is named after the workload alone, so a JobSet
// "train" gets the PodGroup "train".
//
// Characters a Kubernetes name cannot hold are replaced by "-". When the
// readable form is longer than 63 characters or had to be rewritten, it is cut
// and a short hash of the exact identity is appended, so two gangs never share
// a name because of the rewrite.
func podGroupName(workload, gangDef string, keys []string, bare bool) string {
	parts := []string{workload}
	if !bare || len(keys) > 0 {
		parts = append(parts, gangDef)
	}
	parts = append(parts, keys...)
	readable := strings.Join(parts, "-")
	clean := sanitizeName(readable)
	if clean == readable && len(clean) <= maxNameLength && clean != "" {
		return clean
	}
	return cutWithHash(clean, identityHash(parts))
}

// labelValue returns v when it is a valid label value, else a cut form with
// a hash of v (for workload names longer than 63 characters).
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	return cutWithHash(sanitizeName(v), identityHash([]string{v}))
}

func identityHash(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0}) // separator: ("a-b","c") and ("a","b-c") differ
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLength]
}

func cutWithHash(s, hash string) string {
	keep := maxNameLength - 1 - hashLength
	if len(s) > keep {
		s = s[:keep]
	}
	s = strings.TrimRight(s, "-")
	if s == "" {
		return hash
	}
	return s + "-" + hash
}

// sanitizeName lower-cases s and maps every character other than a-z, 0-9
// and "-" to "-", then trims "-" at both ends: the result is both a DNS-1123
// label (a valid object name) and a valid label value. Dots are mapped too,
// because "a..b" or "a.-b" would not be a valid subdomain.
func sanitizeName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
