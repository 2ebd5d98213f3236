package units_test

import (
	"strings"
	"testing"

	"bex.co/bex/internal/units"
)

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{1 << 30: "1 GiB", 500 << 20: "500 MiB", 3<<19 + 1: "1.5 MiB", 1536 << 10: "1.5 MiB", 100: "100 bytes", 64 << 10: "64 KiB"} {
		if got := units.Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for m, want := range map[int64]string{1000: "1 CPU", 2500: "2.5 CPUs", 250: "0.25 CPUs", 16000: "16 CPUs", 0: "0 CPUs"} {
		if got := units.MilliCPU(m); got != want {
			t.Errorf("MilliCPU(%d) = %q, want %q", m, got, want)
		}
	}
}

// TestParse: sizes need their unit and CPU takes CPUs or millicores; what
// is negative, not a number, without a unit or in an unknown one is
// refused saying what to type; what the inputs write reads back.
func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"32Gi": 32 << 30, "32 GiB": 32 << 30, "512Mi": 512 << 20, "1.5Gi": 3 << 29, "2G": 2e9, "2GB": 2e9, "100B": 100, "0": 0, " 1Ti ": 1 << 40,
	} {
		if got, err := units.ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]int64{
		"16": 16000, "2.5": 2500, "2500m": 2500, "2.5 CPUs": 2500, "1 CPU": 1000, "0.125": 125, "0": 0,
	} {
		if got, err := units.ParseMilliCPU(in); err != nil || got != want {
			t.Errorf("ParseMilliCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, tc := range []struct {
		parse    func(string) (int64, error)
		in, want string
	}{
		{units.ParseBytes, "32", `"32" has no unit: give one, such as 32Gi or 32Mi`},
		{units.ParseBytes, "32XB", "the unit XB is not one bex knows"},
		{units.ParseBytes, "-1Gi", `"-1Gi" is negative`},
		{units.ParseBytes, "lots", `"lots" is not a size`},
		{units.ParseBytes, "1e3", `"1e3" is not a size`},
		{units.ParseBytes, "2Ei", "more than 1 EiB"},
		{units.ParseBytes, "99999999999999999999999999Gi", "more than 1 EiB"},
		{units.ParseBytes, "0.5B", "not a whole number of bytes"},
		{units.ParseMilliCPU, "2Gi", "the unit Gi is not one of CPU"},
		{units.ParseMilliCPU, "-2", `"-2" is negative`},
		{units.ParseMilliCPU, "two", `"two" is not a CPU amount`},
		{units.ParseMilliCPU, "2.5m", "millicores are whole"},
		{units.ParseMilliCPU, "0.0001", "finer than a millicore"},
		{units.ParseMilliCPU, "2000000", "more than a million CPUs"},
	} {
		if _, err := tc.parse(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.in, err, tc.want)
		}
	}
	for _, n := range []int64{32 << 30, 1536 << 20, 1000, 0, 3 << 29} {
		if got, err := units.ParseBytes(units.BytesInput(n)); err != nil || got != n {
			t.Errorf("ParseBytes(BytesInput(%d) = %q) = %d, %v", n, units.BytesInput(n), got, err)
		}
	}
	for _, m := range []int64{16000, 2500, 1, 0} {
		if got, err := units.ParseMilliCPU(units.MilliCPUInput(m)); err != nil || got != m {
			t.Errorf("ParseMilliCPU(MilliCPUInput(%d) = %q) = %d, %v", m, units.MilliCPUInput(m), got, err)
		}
	}
}
