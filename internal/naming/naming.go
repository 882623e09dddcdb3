// Package naming names the PodGroup of a gang instance. The pod-grouper
// creates PodGroups with these names and the CLI shows them offline, so both
// go through this one function and can never disagree.
//
// A name is readable and deterministic: the workload name, the gang
// definition and the group keys joined by "-" ("serve-group-0"), or the
// workload name alone for a workload's only whole-workload gang ("train").
// It is at most 63 characters with a short hash of the exact identity
// appended when the readable form had to be cut or rewritten.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// MaxLength is 63 although a PodGroup's name may be a DNS subdomain of up to
// 253 characters: every member pod carries the name as the value of the
// label scheduling.x-k8s.io/pod-group, and a label value is at most 63
// characters. A longer name could be created but never pointed at.
const MaxLength = 63

// hashLength is the number of hex digits of the identity hash appended when a
// name is cut or had to be rewritten. 8 digits (32 bits) make a collision
// between two gangs of one namespace negligible.
const hashLength = 8

// PodGroupName returns the name of the PodGroup of the gang instance
// (gangDef, keys) of the workload named workload, described by k (nil is
// read as a definition with a single gang).
func PodGroupName(workload string, k *kartav1alpha1.Karta, gangDef string, keys []string) string {
	return podGroupName(workload, gangDef, keys, bare(k, gangDef, keys))
}

// WholeWorkloadName returns the PodGroup name of gang definition gangDef when
// it is known from the workload alone: the gang has no grouping keys, so
// there is one instance for the whole workload. ok is false for a grouped
// gang (one PodGroup per key, named after pod values) and for a gang the
// definition does not have.
func WholeWorkloadName(workload string, k *kartav1alpha1.Karta, gangDef string) (name string, ok bool) {
	if k == nil || k.Spec.OptimizationInstructions == nil || k.Spec.OptimizationInstructions.GangScheduling == nil {
		return "", false
	}
	gs := k.Spec.OptimizationInstructions.GangScheduling
	found := false
	for _, pg := range gs.PodGroups {
		if pg.Name != gangDef {
			continue
		}
		found = true
		for _, m := range pg.Members {
			if len(m.GroupByKeyPaths) > 0 {
				return "", false
			}
		}
	}
	if t := gs.PodGroup; t != nil {
		// The tree form is never grouped; unnamed, it is named after the
		// root component (as the definition compiler does).
		n := t.Name
		if n == "" {
			n = k.Spec.StructureDefinition.RootComponent.Name
		}
		found = found || n == gangDef
	}
	if !found {
		return "", false
	}
	return PodGroupName(workload, k, gangDef, nil), true
}

// bare tells whether a gang is named after the workload alone: a
// whole-workload gang (no keys) that is the definition's only gang or is
// named after the root component.
func bare(k *kartav1alpha1.Karta, gangDef string, keys []string) bool {
	if len(keys) > 0 {
		return false
	}
	if k == nil {
		return true
	}
	if gangDef == k.Spec.StructureDefinition.RootComponent.Name {
		return true
	}
	oi := k.Spec.OptimizationInstructions
	if oi == nil || oi.GangScheduling == nil {
		return true
	}
	n := len(oi.GangScheduling.PodGroups)
	if oi.GangScheduling.PodGroup != nil {
		n++
	}
	return n <= 1
}

// podGroupName joins the parts: the workload, then (unless bare) the gang
// definition, then the keys.
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
	if clean == readable && len(clean) <= MaxLength && clean != "" {
		return clean
	}
	return cutWithHash(clean, identityHash(parts))
}

// LabelValue returns v when it is a valid label value, else a cut form with
// a hash of v (for workload names longer than 63 characters).
func LabelValue(v string) string {
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
	keep := MaxLength - 1 - hashLength
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

// uidLength is how much of the workload's UID a native PodGroup name
// carries: enough that two incarnations of a workload never share one.
const uidLength = 8

// NativePodGroupName returns the name of the native PodGroup
// (scheduling.k8s.io/v1beta1) of a gang instance: PodGroupName's, with the
// first characters of the workload's UID appended. A native PodGroup keeps
// a finalizer while any pod names it, and a pod's spec.schedulingGroup is
// immutable: a workload deleted and created again under the same name must
// never meet its old, terminating PodGroup.
func NativePodGroupName(workload string, uid string, k *kartav1alpha1.Karta, gangDef string, keys []string) string {
	base := PodGroupName(workload, k, gangDef, keys)
	id := sanitizeName(uid)
	if len(id) > uidLength {
		id = id[:uidLength]
	}
	if id == "" {
		return base
	}
	if keep := MaxLength - 1 - len(id); len(base) > keep {
		base = strings.TrimRight(base[:keep], "-")
	}
	return base + "-" + id
}
