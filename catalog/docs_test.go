package catalog

import (
	"bytes"
	"os"
	"testing"
)

// TestDocsUpToDate fails when catalog/README.md differs from what the
// definitions render; run make catalog-docs.
func TestDocsUpToDate(t *testing.T) {
	want, err := RenderDocs()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatalf("catalog/README.md: %v (run make catalog-docs)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("catalog/README.md is stale: run make catalog-docs")
	}
	for _, name := range Types {
		if !bytes.Contains(want, []byte("\n| "+name+" |")) {
			t.Errorf("the rendered table has no line for %s", name)
		}
	}
}
