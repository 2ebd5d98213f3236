package units

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/internal/bytesize"
)

// Bytes renders a size the way a person reads a limit: 1 GiB, 500 MiB,
// 1.5 MiB, 1536 KiB, 100 bytes.
func Bytes(n int64) string {
	if n >= 1<<20 && n%(1<<20) != 0 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return bytesize.Format(n)
}

// MilliCPU renders CPU in millicores as a person reads it, in CPUs: 1 CPU,
// 2.5 CPUs, 0.25 CPUs.
func MilliCPU(m int64) string {
	if m == 1000 {
		return "1 CPU"
	}
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64) + " CPUs"
}

// MaxBytes is the largest size ParseBytes reads: 1 EiB.
const MaxBytes = 1 << 60

// MaxMilliCPU is the largest CPU ParseMilliCPU reads: a million CPUs.
const MaxMilliCPU = 1_000_000_000

// amountRE is a number and its unit, as typed.
var amountRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)

// sizeUnits are the units a size may be typed in, as the user types them,
// to their Kubernetes suffix.
var sizeUnits = map[string]string{
	"Ki": "Ki", "KiB": "Ki", "Mi": "Mi", "MiB": "Mi", "Gi": "Gi", "GiB": "Gi", "Ti": "Ti", "TiB": "Ti", "Pi": "Pi", "PiB": "Pi", "Ei": "Ei", "EiB": "Ei",
	"B": "", "k": "k", "kB": "k", "KB": "k", "M": "M", "MB": "M", "G": "G", "GB": "G", "T": "T", "TB": "T", "P": "P", "PB": "P", "E": "E", "EB": "E",
	// A bare 0, the only number without a unit ParseBytes takes.
	"": "",
}

// ParseBytes reads a size typed with its unit: "32Gi", "32 GiB", "512Mi",
// "1.5Gi", "2G" (decimal), "100B", as the Kubernetes quantities the
// --quota-memory flag takes, with "GiB" for "Gi". A number without a unit
// but 0 is refused, as it is too easily bytes meant as GiB; the errors say
// what to type.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative: give 0 or more, such as 32Gi", s)
	}
	m := amountRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size: give a number and a unit, such as 32Gi or 512Mi", s)
	}
	if m[2] == "" && m[1] != "0" {
		return 0, fmt.Errorf("%q has no unit: give one, such as %sGi or %sMi", s, m[1], m[1])
	}
	unit, ok := sizeUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("%q: the unit %s is not one bex knows: give Ki, Mi, Gi, Ti or Pi (or k, M, G, T, P)", s, m[2])
	}
	q, err := resource.ParseQuantity(m[1] + unit)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: give a number and a unit, such as 32Gi or 512Mi", s)
	}
	if q.Cmp(*resource.NewQuantity(MaxBytes, resource.BinarySI)) > 0 {
		return 0, fmt.Errorf("%q is more than 1 EiB, the largest size bex takes", s)
	}
	n := q.Value()
	if !q.Equal(*resource.NewQuantity(n, resource.BinarySI)) {
		return 0, fmt.Errorf("%q is not a whole number of bytes: give it in a smaller unit", s)
	}
	return n, nil
}

// ParseMilliCPU reads CPU typed in CPUs ("16", "2.5", "2.5 CPUs") or in
// millicores ("2500m"), to millicores. Another unit is refused; the errors
// say what to type.
func ParseMilliCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative: give 0 or more, such as 16 or 2500m", s)
	}
	m := amountRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a CPU amount: give CPUs, such as 16 or 2.5, or millicores, such as 2500m", s)
	}
	var q resource.Quantity
	var err error
	switch strings.ToLower(m[2]) {
	case "", "cpu", "cpus":
		q, err = resource.ParseQuantity(m[1])
	case "m":
		if strings.Contains(m[1], ".") {
			return 0, fmt.Errorf("%q: millicores are whole: give 2500m, or 2.5 in CPUs", s)
		}
		q, err = resource.ParseQuantity(m[1] + "m")
	default:
		return 0, fmt.Errorf("%q: the unit %s is not one of CPU: give CPUs, such as 16 or 2.5, or millicores, such as 2500m", s, m[2])
	}
	if err != nil {
		return 0, fmt.Errorf("%q is not a CPU amount: give CPUs, such as 16 or 2.5, or millicores, such as 2500m", s)
	}
	if q.Cmp(*resource.NewMilliQuantity(MaxMilliCPU, resource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("%q is more than a million CPUs, the most bex takes", s)
	}
	n := q.MilliValue()
	if !q.Equal(*resource.NewMilliQuantity(n, resource.DecimalSI)) {
		return 0, fmt.Errorf("%q is finer than a millicore: give at most three decimals, such as 0.125", s)
	}
	return n, nil
}

// BytesInput writes n as ParseBytes reads it back: in the largest binary
// unit that divides it ("32Gi", "1536Mi"), else in bytes ("1000B").
func BytesInput(n int64) string {
	if n == 0 || n%1024 != 0 {
		return strconv.FormatInt(n, 10) + "B"
	}
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// MilliCPUInput writes m as ParseMilliCPU reads it back: "16", "2500m".
func MilliCPUInput(m int64) string {
	return resource.NewMilliQuantity(m, resource.DecimalSI).String()
}
