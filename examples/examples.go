// Package examples holds the example workloads of the muster sandbox (`make
// run`), one YAML file per workload, applied in file-name order. Each file is
// a plain manifest a user could apply to a real cluster running muster; the
// sandbox takes its own instructions from annotations on the workload, so no
// Go code needs to know what a workload is:
//
//	sandbox.muster.io/description  one line printed above its describe view
//	sandbox.muster.io/operator     the operator that must run for it (a name
//	                               the sandbox can start: operators.Names() of localcluster/operators)
//	sandbox.muster.io/expect       "scheduled" (default): wait until every
//	                               pod is bound; "unschedulable": wait until
//	                               the scheduler has said why it is not;
//	                               "queued": wait until the cluster's
//	                               admission system (Kueue) holds it back
//
// The files of kueue/ are the examples of a sandbox started with --kueue
// (Kueue), in place of these: workloads submitted to its LocalQueue.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/internal/yamldoc"
)

//go:embed *.yaml kueue/*.yaml
var files embed.FS

// Annotation keys the sandbox reads on an example workload.
const (
	AnnotationDescription = "sandbox.muster.io/description"
	AnnotationOperator    = "sandbox.muster.io/operator"
	AnnotationExpect      = "sandbox.muster.io/expect"
)

// Expect is what the sandbox waits for after applying an example.
type Expect string

const (
	// ExpectScheduled: every pod of the workload is bound to a node.
	ExpectScheduled Expect = "scheduled"
	// ExpectUnschedulable: the scheduler has given its reason for each gang.
	ExpectUnschedulable Expect = "unschedulable"
	// ExpectQueued: the cluster's admission system (Kueue) holds the
	// workload back, waiting for quota.
	ExpectQueued Expect = "queued"
)

// Example is one example workload.
type Example struct {
	// File is the file name inside this package ("01-<what>.yaml").
	File string
	// APIVersion, Kind, Name and Namespace of the workload; Namespace is
	// empty when the file leaves it to the sandbox.
	APIVersion, Kind, Name, Namespace string
	Description                       string
	// Operator the workload needs, "" when the cluster's own controllers
	// are enough.
	Operator string
	Expect   Expect
	// YAML is the file as written.
	YAML []byte
}

// All returns every example in file-name order.
func All() ([]Example, error) { return glob("*.yaml") }

// Kueue returns the examples of a sandbox with Kueue, in file-name order.
func Kueue() ([]Example, error) { return glob("kueue/*.yaml") }

func glob(pattern string) ([]Example, error) {
	names, err := fs.Glob(files, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Example, 0, len(names))
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ex, err := Parse(n, data)
		if err != nil {
			return nil, err
		}
		out = append(out, ex)
	}
	return out, nil
}

// Parse reads one example file: a single YAML document holding one object
// with apiVersion, kind and metadata.name, and valid sandbox annotations.
// Errors name the file and the field.
func Parse(file string, data []byte) (Example, error) {
	fail := func(format string, args ...any) (Example, error) {
		return Example{}, fmt.Errorf("example %s: %s", file, fmt.Sprintf(format, args...))
	}
	docs, err := documents(data)
	if err != nil {
		return fail("%v", err)
	}
	if len(docs) != 1 {
		return fail("want exactly one YAML document (one workload per file), found %d", len(docs))
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(docs[0], &obj); err != nil {
		return fail("%v", err)
	}
	switch {
	case obj.APIVersion == "":
		return fail("apiVersion is required")
	case obj.Kind == "":
		return fail("kind is required")
	case obj.Metadata.Name == "":
		return fail("metadata.name is required")
	}
	ann := obj.Metadata.Annotations
	ex := Example{
		File: file, APIVersion: obj.APIVersion, Kind: obj.Kind,
		Name: obj.Metadata.Name, Namespace: obj.Metadata.Namespace,
		Description: strings.TrimSpace(ann[AnnotationDescription]),
		Operator:    strings.TrimSpace(ann[AnnotationOperator]),
		Expect:      ExpectScheduled,
		YAML:        data,
	}
	if v, ok := ann[AnnotationExpect]; ok {
		switch e := Expect(strings.TrimSpace(v)); e {
		case ExpectScheduled, ExpectUnschedulable, ExpectQueued:
			ex.Expect = e
		default:
			return fail("metadata.annotations[%s]: %q; want %q, %q or %q", AnnotationExpect, v, ExpectScheduled, ExpectUnschedulable, ExpectQueued)
		}
	}
	if _, ok := ann[AnnotationOperator]; ok && ex.Operator == "" {
		return fail("metadata.annotations[%s] is empty; name an operator or drop the annotation", AnnotationOperator)
	}
	return ex, nil
}

// documents splits a YAML stream into its non-empty documents (comments
// alone do not make a document).
func documents(data []byte) ([][]byte, error) {
	docs, err := yamldoc.Split(data, false)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = d.YAML
	}
	return out, nil
}
