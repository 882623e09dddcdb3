package yamldoc

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		strict  bool
		want    []string // JSON of the kept documents
		wantN   []int
		wantErr string
	}{
		{name: "one document", in: "a: 1\n", want: []string{`{"a":1}`}, wantN: []int{1}},
		{name: "leading separator and comments only", in: "---\n# nothing\n---\na: 1\n---\n", want: []string{`{"a":1}`}, wantN: []int{2}},
		{name: "null and empty are skipped", in: "null\n---\n\n---\nb: [1]\n", want: []string{`{"b":[1]}`}, wantN: []int{3}},
		{name: "JSON documents", in: `{"a": 1}` + "\n---\n" + `[1, 2]`, want: []string{`{"a":1}`, `[1,2]`}, wantN: []int{1, 2}},
		{name: "broken YAML names the document", in: "a: 1\n---\nb: [\n", wantErr: "document 2: yaml: line"},
		{name: "duplicate keys pass without strict", in: "a: 1\na: 2\n", want: []string{`{"a":2}`}, wantN: []int{1}},
		{name: "duplicate keys fail with strict", in: "a: 1\na: 2\n", strict: true, wantErr: `document 1: yaml: unmarshal errors:`},
		{name: "nothing", in: "", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Split([]byte(tc.in), tc.strict)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != len(tc.want) {
				t.Fatalf("%d documents, want %d", len(docs), len(tc.want))
			}
			for i, d := range docs {
				if string(d.JSON) != tc.want[i] || d.N != tc.wantN[i] {
					t.Errorf("document %d = %s (N %d), want %s (N %d)", i, d.JSON, d.N, tc.want[i], tc.wantN[i])
				}
				if len(d.YAML) == 0 {
					t.Errorf("document %d lost its text", i)
				}
			}
		})
	}
}
