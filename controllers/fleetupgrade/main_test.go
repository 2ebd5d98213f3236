package fleetupgrade_test

import (
	"testing"

	"bex.co/bex/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
