package image

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the module root, two levels up from this package.
const repoRoot = "../.."

// dockerfileStage is what the runtime stage of the Dockerfile says about
// the image, and what its build stage builds.
type dockerfileStage struct {
	from       string
	labels     map[string]string
	copies     map[string]string // destination -> source
	user       string
	entrypoint []string
	built      []string // BINARIES= of the build stage's make build
}

// instructions joins continuation lines and drops comments: one
// instruction per element.
func instructions(data string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(data, "\n") {
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\") + " ")
			continue
		}
		cur.WriteString(t)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

// labelPair matches key="value" (or key=value) in a LABEL instruction.
var labelPair = regexp.MustCompile(`([A-Za-z0-9._-]+)=("([^"]*)"|(\S+))`)

func parseDockerfile(t *testing.T, file string) dockerfileStage {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var st dockerfileStage
	for _, ins := range instructions(string(data)) {
		keyword, rest, _ := strings.Cut(ins, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(keyword) {
		case "FROM":
			// A new stage: only the last one is the image.
			st = dockerfileStage{from: rest, labels: map[string]string{}, copies: map[string]string{}, built: st.built}
		case "LABEL":
			for _, m := range labelPair.FindAllStringSubmatch(rest, -1) {
				v := m[3]
				if m[4] != "" {
					v = m[4]
				}
				st.labels[m[1]] = v
			}
		case "COPY":
			f := strings.Fields(rest)
			if len(f) == 3 && f[0] == "--from=build" {
				st.copies[f[2]] = f[1]
			}
		case "USER":
			st.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec (JSON) form: %v", rest, err)
			}
		case "RUN":
			if m := regexp.MustCompile(`BINARIES="([^"]*)"`).FindStringSubmatch(rest); m != nil {
				st.built = strings.Fields(m[1])
			}
		}
	}
	return st
}

// TestDockerfileBuildsTheSameImage: the Dockerfile (for people with
// Docker) and this builder (make image) ship the same binaries at the same
// paths, with the same user, entrypoint and labels, on a base with the
// same nonroot account.
func TestDockerfileBuildsTheSameImage(t *testing.T) {
	st := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))

	if !strings.HasSuffix(st.from, ":nonroot") {
		t.Errorf("runtime base %q: want a distroless :nonroot variant (user 65532, as /etc/passwd here)", st.from)
	}
	if st.user != User {
		t.Errorf("Dockerfile USER %q, builder %q", st.user, User)
	}
	if !reflect.DeepEqual(st.entrypoint, Entrypoint) {
		t.Errorf("Dockerfile ENTRYPOINT %q, builder %q", st.entrypoint, Entrypoint)
	}
	// The Dockerfile fills version and revision from build arguments.
	want := Options{Version: "${VERSION}", Revision: "${REVISION}"}.Labels()
	if !reflect.DeepEqual(st.labels, want) {
		t.Errorf("Dockerfile LABELs\n  %v\nbuilder labels\n  %v", st.labels, want)
	}

	var dests, wantDests []string
	for d, src := range st.copies {
		dests = append(dests, d)
		// make build names each binary after its command.
		if path.Base(src) != path.Base(d) {
			t.Errorf("COPY %s %s: the file changes its name", src, d)
		}
	}
	var wantBuilt []string
	for _, b := range Binaries {
		wantDests = append(wantDests, b.Path)
		if b.Package != "" {
			wantBuilt = append(wantBuilt, path.Base(b.Package))
		}
	}
	sort.Strings(dests)
	sort.Strings(wantDests)
	if !reflect.DeepEqual(dests, wantDests) {
		t.Errorf("Dockerfile copies to %v, builder ships %v", dests, wantDests)
	}
	sort.Strings(st.built)
	sort.Strings(wantBuilt)
	if !reflect.DeepEqual(st.built, wantBuilt) {
		t.Errorf("Dockerfile builds BINARIES=%v, builder %v", st.built, wantBuilt)
	}
}

func TestParseDockerfile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "Dockerfile")
	content := `FROM golang AS build
LABEL ignored="build stage"
RUN make build \
    BINARIES="a b"
# a comment
FROM base:nonroot
LABEL a="x y" \
      b=z
COPY --from=build /out/a /usr/local/bin/a
COPY local /etc/local
USER 1:1
ENTRYPOINT ["/usr/local/bin/a", "--flag"]
`
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got := parseDockerfile(t, file)
	want := dockerfileStage{
		from:       "base:nonroot",
		labels:     map[string]string{"a": "x y", "b": "z"},
		copies:     map[string]string{"/usr/local/bin/a": "/out/a"},
		user:       "1:1",
		entrypoint: []string{"/usr/local/bin/a", "--flag"},
		built:      []string{"a", "b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n  %+v\nwant\n  %+v", got, want)
	}
}
