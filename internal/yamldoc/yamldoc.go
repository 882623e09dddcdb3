// Package yamldoc reads multi-document YAML streams the one way muster does:
// documents that hold nothing (empty, comments only, null) are skipped, each
// other one is kept as written and as JSON, and an error names the document
// by its 1-based number. It imports nothing of muster.
package yamldoc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Doc is one document of a stream.
type Doc struct {
	// N is the document's number in the stream, from 1, counting the
	// skipped ones, so that it matches what an editor shows.
	N int
	// YAML is the document as written.
	YAML []byte
	// JSON is the document converted to JSON.
	JSON []byte
}

// Split returns the documents of data that hold a value. With strict, a
// duplicate key is an error (sigs.k8s.io/yaml YAMLToJSONStrict).
func Split(data []byte, strict bool) ([]Doc, error) {
	toJSON := yaml.YAMLToJSON
	if strict {
		toJSON = yaml.YAMLToJSONStrict
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Doc
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		j, err := toJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %s", n, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue
		}
		out = append(out, Doc{N: n, YAML: doc, JSON: j})
	}
}
