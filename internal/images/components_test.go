package images

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in      string
		env     []string // beyond CGO_ENABLED=0 GOOS=linux GOARCH
		wantErr string
	}{
		{in: "linux/amd64"},
		{in: "linux/arm64"},
		{in: "linux/arm64/v8"},
		{in: "linux/arm/v7", env: []string{"GOARM=7"}},
		{in: "linux/amd64/v3", env: []string{"GOAMD64=v3"}},
		{in: "linux", wantErr: "want linux/ARCH"},
		{in: "darwin/arm64", wantErr: "want linux/ARCH"},
		{in: "linux/mips64", wantErr: `architecture "mips64" is not built`},
		{in: "linux/arm/v5", wantErr: `variant "v5" of arm`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParsePlatform(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			env, err := goEnv(p)
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + p.Architecture}, tc.env...)
			if !slices.Equal(env, want) {
				t.Errorf("go env %q, want %q", env, want)
			}
		})
	}
}
