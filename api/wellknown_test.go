package api

import "testing"

func TestPodGroupPriority(t *testing.T) {
	cases := []struct {
		name   string
		ann    map[string]string
		want   int32
		wantOK bool
	}{
		{"absent", nil, 0, false},
		{"set", map[string]string{AnnotationPriority: "1000"}, 1000, true},
		{"negative", map[string]string{AnnotationPriority: "-5"}, -5, true},
		{"zero", map[string]string{AnnotationPriority: "0"}, 0, true},
		{"not a number", map[string]string{AnnotationPriority: "high"}, 0, false},
		{"above int32", map[string]string{AnnotationPriority: "2147483648"}, 0, false},
		{"empty", map[string]string{AnnotationPriority: ""}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PodGroupPriority(tc.ann)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("PodGroupPriority(%v) = %d, %v; want %d, %v", tc.ann, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
