package storagetest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// Backend is one backing store, empty when made, and the means to open
// Storage instances over it.
type Backend struct {
	// New returns a new Storage over the backing store. Each call gives a
	// separate instance, as a separate process (an edge replica) would
	// have one: it shares keys and locks with the others only through the
	// backing store. Required.
	New func(t *testing.T) certmagic.Storage
	// Crash makes s act as if its process died while holding locks: s
	// stops keeping them fresh and never releases them. The suite does not
	// use s afterwards. Nil skips the stale-lock test.
	Crash func(t *testing.T, s certmagic.Storage)
	// StaleAfter bounds how long a crashed holder's lock keeps a waiting
	// Lock waiting, counted from the crash and including the waiter's
	// polling. The suite allows half as much again for the takeover, and
	// checks that a live holder keeps its lock at least that long. Zero
	// skips both tests.
	StaleAfter time.Duration
}

// recently is how far a Modified time may be from the test's clock: the
// backing store may keep its own (a database server's).
const recently = 10 * time.Second

// patience bounds waits for things that happen at once when all is well.
const patience = 30 * time.Second

// Run checks, each in a parallel subtest on a fresh Backend from newBackend,
// that the Storage follows certmagic's rules: what Store, Load, Delete,
// Exists, List and Stat do with files, implied directories and missing keys;
// that instances share what they store; and that locks exclude across
// instances, honour contexts, pass to a waiter on Unlock, stay held while
// their holder lives and go to a waiter once a crashed holder's lock is
// stale.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	tests := []struct {
		name string
		test func(t *testing.T, b Backend)
	}{
		{"StoreLoad", testStoreLoad},
		{"Overwrite", testOverwrite},
		{"ConcurrentStores", testConcurrentStores},
		{"Missing", testMissing},
		{"Exists", testExists},
		{"Stat", testStat},
		{"ListDirectChildren", testListDirectChildren},
		{"ListRecursive", testListRecursive},
		{"DeleteFile", testDeleteFile},
		{"DeleteDirectory", testDeleteDirectory},
		{"SharedBetweenInstances", testShared},
		{"LockExcludes", testLockExcludes},
		{"LockNamesAreIndependent", testLockNames},
		{"TryLock", testTryLock},
		{"LockHonoursContext", testLockContext},
		{"UnlockLetsWaiterIn", testUnlockLetsWaiterIn},
		{"HeldLockStaysFresh", testHeldLockStaysFresh},
		{"StaleLockTakenOver", testStaleLockTakenOver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			if b.New == nil {
				t.Fatal("storagetest: Backend.New is nil")
			}
			tt.test(t, b)
		})
	}
}

// tree is the set of files the directory tests store. Around "p" it has
// names that share its first letter, and names just outside the byte range
// of "p/": '.' sorts before '/', '0' right after it.
var tree = map[string]string{
	"p/a/1":   "a1",
	"p/a/2":   "a2",
	"p/b/x/y": "bxy",
	"p/bb/1":  "bb1",
	"p/c":     "c",
	"pq/w":    "pqw",
	"p.x/1":   "px1",
	"p0/1":    "p01",
	"q/z":     "qz",
}

// storeTree stores tree in s.
func storeTree(t *testing.T, s certmagic.Storage) {
	t.Helper()
	for k, v := range tree {
		mustStore(t, s, k, []byte(v))
	}
}

func mustStore(t *testing.T, s certmagic.Storage, key string, value []byte) {
	t.Helper()
	if err := s.Store(t.Context(), key, value); err != nil {
		t.Fatalf("Store(%q): %v", key, err)
	}
}

// wantValue checks that key loads as want.
func wantValue(t *testing.T, s certmagic.Storage, key string, want []byte) {
	t.Helper()
	got, err := s.Load(t.Context(), key)
	if err != nil {
		t.Errorf("Load(%q): %v", key, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Load(%q) = %d bytes %.32q, want %d bytes %.32q", key, len(got), got, len(want), want)
	}
}

// wantNotExist checks that err says the key does not exist.
func wantNotExist(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: err = %v, want one satisfying errors.Is(err, fs.ErrNotExist)", what, err)
	}
}

// wantList checks List(dir, recursive) against want, in any order.
func wantList(t *testing.T, s certmagic.Storage, dir string, recursive bool, want []string) {
	t.Helper()
	got, err := s.List(t.Context(), dir, recursive)
	if err != nil {
		t.Errorf("List(%q, %v): %v", dir, recursive, err)
		return
	}
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("List(%q, %v) = %q, want %q", dir, recursive, got, want)
	}
}

// binary is a value that is not text: NUL bytes, invalid UTF-8, and large.
func binary(fill byte) []byte {
	v := append([]byte{0, 0xff, 'a', 0xfe, '\n', 0}, bytes.Repeat([]byte{fill}, 64<<10)...)
	return append(v, 0)
}

func testStoreLoad(t *testing.T, b Backend) {
	s := b.New(t)
	for key, value := range map[string][]byte{
		"certificates/acme-v02.api.letsencrypt.org-directory/example.com/example.com.crt": binary('c'),
		"acme/ca/users/ops@example.com/ops.json":                                          []byte(`{"status":"valid"}`),
		"top":                                                                             []byte("a key without a directory"),
		"empty/value":                                                                     {},
		"nil/value":                                                                       nil,
		"wildcard_.x/k.y":                                                                 []byte("Safe keys keep underscores, dots and dashes"),
	} {
		mustStore(t, s, key, value)
		wantValue(t, s, key, value)
	}
}

func testOverwrite(t *testing.T, b Backend) {
	s := b.New(t)
	mustStore(t, s, "o/key", binary('1'))
	mustStore(t, s, "o/key", []byte("shorter"))
	wantValue(t, s, "o/key", []byte("shorter"))
	info, err := s.Stat(t.Context(), "o/key")
	if err != nil || info.Size != int64(len("shorter")) {
		t.Errorf("Stat after overwrite = %+v, %v; want size %d", info, err, len("shorter"))
	}
}

// testConcurrentStores: concurrent Stores to one key leave one whole value,
// never a mix; concurrent Stores to different keys all land.
func testConcurrentStores(t *testing.T, b Backend) {
	s := b.New(t)
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := s.Store(t.Context(), "c/same", binary(byte('a'+i))); err != nil {
				t.Errorf("Store(c/same) #%d: %v", i, err)
			}
			if err := s.Store(t.Context(), "c/own/"+strconv.Itoa(i), binary(byte('a'+i))); err != nil {
				t.Errorf("Store(c/own/%d): %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := s.Load(t.Context(), "c/same")
	if err != nil {
		t.Fatalf("Load(c/same): %v", err)
	}
	whole := false
	for i := range n {
		whole = whole || bytes.Equal(got, binary(byte('a'+i)))
	}
	if !whole {
		t.Errorf("after concurrent Stores, c/same is %d bytes that none of them wrote", len(got))
	}
	for i := range n {
		wantValue(t, s, "c/own/"+strconv.Itoa(i), binary(byte('a'+i)))
	}
}

// testMissing: Load, Stat and List of a missing key are fs.ErrNotExist; Delete
// of one is not an error. Prefixes count by component: "p" is not under "pq".
func testMissing(t *testing.T, b Backend) {
	s := b.New(t)
	ctx := t.Context()
	mustStore(t, s, "pq/w", []byte("x"))
	// Not checked: a key under a file. FileStorage answers ENOTDIR for it,
	// which is no fs.ErrNotExist, and Exists reports it as existing.
	for _, key := range []string{"nothing", "nothing/deeper", "p", "pq/v"} {
		_, err := s.Load(ctx, key)
		wantNotExist(t, "Load("+key+")", err)
		_, err = s.Stat(ctx, key)
		wantNotExist(t, "Stat("+key+")", err)
		for _, recursive := range []bool{false, true} {
			_, err = s.List(ctx, key, recursive)
			wantNotExist(t, "List("+key+", "+strconv.FormatBool(recursive)+")", err)
		}
		if s.Exists(ctx, key) {
			t.Errorf("Exists(%q) = true for a missing key", key)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) of a missing key: %v, want nil", key, err)
		}
	}
	// A directory has no value; what error says so is not specified
	// (FileStorage: EISDIR).
	if v, err := s.Load(ctx, "pq"); err == nil {
		t.Errorf("Load of a directory = %q, nil; want an error", v)
	}
	if err := s.Delete(ctx, "pq/w"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "pq/w"); err != nil {
		t.Errorf("Delete of a key deleted already: %v, want nil", err)
	}
}

func testExists(t *testing.T, b Backend) {
	s := b.New(t)
	storeTree(t, s)
	for key, want := range map[string]bool{
		"p/a/1":  true, // file
		"p/a":    true, // directory
		"p":      true, // directory of directories
		"p/b/x":  true,
		"pq":     true,
		"p/a/3":  false,
		"p/b/xy": false, // "p/b/x" is no prefix of it
		"pq/x":   false,
	} {
		if got := s.Exists(t.Context(), key); got != want {
			t.Errorf("Exists(%q) = %v, want %v", key, got, want)
		}
	}
}

func testStat(t *testing.T, b Backend) {
	s := b.New(t)
	start := time.Now()
	mustStore(t, s, "s/dir/file", []byte("12345"))
	end := time.Now()

	info, err := s.Stat(t.Context(), "s/dir/file")
	if err != nil {
		t.Fatalf("Stat of a file: %v", err)
	}
	if info.Key != "s/dir/file" || info.Size != 5 || !info.IsTerminal {
		t.Errorf("Stat of a file = %+v, want key s/dir/file, size 5, terminal", info)
	}
	if info.Modified.Before(start.Add(-recently)) || info.Modified.After(end.Add(recently)) {
		t.Errorf("Stat of a file: modified %v, want about %v (within %v)", info.Modified, start, recently)
	}

	for _, dir := range []string{"s/dir", "s"} {
		info, err := s.Stat(t.Context(), dir)
		if err != nil {
			t.Errorf("Stat of directory %s: %v", dir, err)
			continue
		}
		if info.Key != dir || info.IsTerminal {
			t.Errorf("Stat of directory %s = %+v, want that key, not terminal", dir, info)
		}
	}
}

func testListDirectChildren(t *testing.T, b Backend) {
	s := b.New(t)
	storeTree(t, s)
	wantList(t, s, "p", false, []string{"p/a", "p/b", "p/bb", "p/c"})
	wantList(t, s, "p/a", false, []string{"p/a/1", "p/a/2"})
	wantList(t, s, "p/b", false, []string{"p/b/x"})
	wantList(t, s, "p/b/x", false, []string{"p/b/x/y"})
	wantList(t, s, "q", false, []string{"q/z"})
}

// testListRecursive: every file under the directory and nothing outside it.
// Directories on the way may be listed too (FileStorage lists them).
func testListRecursive(t *testing.T, b Backend) {
	s := b.New(t)
	storeTree(t, s)
	files := []string{"p/a/1", "p/a/2", "p/b/x/y", "p/bb/1", "p/c"}
	dirs := []string{"p/a", "p/b", "p/b/x", "p/bb"}
	got, err := s.List(t.Context(), "p", true)
	if err != nil {
		t.Fatalf("List(p, true): %v", err)
	}
	for _, f := range files {
		if !slices.Contains(got, f) {
			t.Errorf("List(p, true) = %q lacks file %s", got, f)
		}
	}
	for _, k := range got {
		if !slices.Contains(files, k) && !slices.Contains(dirs, k) {
			t.Errorf("List(p, true) = %q has %s, which is neither a file nor a directory under p", got, k)
		}
	}
	wantList(t, s, "p/a", true, []string{"p/a/1", "p/a/2"})
}

func testDeleteFile(t *testing.T, b Backend) {
	s := b.New(t)
	storeTree(t, s)
	if err := s.Delete(t.Context(), "p/a/1"); err != nil {
		t.Fatalf("Delete(p/a/1): %v", err)
	}
	_, err := s.Load(t.Context(), "p/a/1")
	wantNotExist(t, "Load after Delete", err)
	if s.Exists(t.Context(), "p/a/1") {
		t.Error("Exists after Delete = true")
	}
	wantValue(t, s, "p/a/2", []byte(tree["p/a/2"]))
	wantList(t, s, "p/a", false, []string{"p/a/2"})
}

// testDeleteDirectory: Delete of a directory removes everything under it and
// nothing else, not even keys that start with the same letters.
func testDeleteDirectory(t *testing.T, b Backend) {
	s := b.New(t)
	storeTree(t, s)
	ctx := t.Context()
	if err := s.Delete(ctx, "p/b"); err != nil {
		t.Fatalf("Delete(p/b): %v", err)
	}
	for _, k := range []string{"p/b", "p/b/x", "p/b/x/y"} {
		if s.Exists(ctx, k) {
			t.Errorf("Exists(%q) = true after deleting directory p/b", k)
		}
	}
	_, err := s.Load(ctx, "p/b/x/y")
	wantNotExist(t, "Load under a deleted directory", err)
	wantValue(t, s, "p/bb/1", []byte(tree["p/bb/1"]))
	wantList(t, s, "p", false, []string{"p/a", "p/bb", "p/c"})

	if err := s.Delete(ctx, "p"); err != nil {
		t.Fatalf("Delete(p): %v", err)
	}
	_, err = s.List(ctx, "p", true)
	wantNotExist(t, "List of a deleted directory", err)
	for k, v := range tree {
		if k[:2] == "p/" {
			if s.Exists(ctx, k) {
				t.Errorf("Exists(%q) = true after deleting directory p", k)
			}
			continue
		}
		wantValue(t, s, k, []byte(v))
	}
}

// testShared: what one instance stores, another loads, lists and deletes.
func testShared(t *testing.T, b Backend) {
	one, two := b.New(t), b.New(t)
	ctx := t.Context()
	mustStore(t, one, "shared/dir/key", []byte("from one"))
	wantValue(t, two, "shared/dir/key", []byte("from one"))
	wantList(t, two, "shared", false, []string{"shared/dir"})
	mustStore(t, two, "shared/dir/key", []byte("from two"))
	wantValue(t, one, "shared/dir/key", []byte("from two"))
	if err := two.Delete(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	if one.Exists(ctx, "shared/dir/key") {
		t.Error("a key deleted by one instance still exists for another")
	}
}

// testLockExcludes: goroutines on two instances increment a stored counter
// under one lock; no two are ever inside at once and no increment is lost.
func testLockExcludes(t *testing.T, b Backend) {
	instances := []certmagic.Storage{b.New(t), b.New(t)}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const name, counter, perInstance, rounds = "issue_cert_excl.example", "excl/counter", 2, 2
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for _, s := range instances {
		for range perInstance {
			wg.Go(func() {
				for range rounds {
					if err := s.Lock(ctx, name); err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					n := 0
					if v, err := s.Load(ctx, counter); err == nil {
						n, _ = strconv.Atoi(string(v))
					} else if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("Load(counter): %v", err)
					}
					if err := s.Store(ctx, counter, []byte(strconv.Itoa(n+1))); err != nil {
						t.Errorf("Store(counter): %v", err)
					}
					inside.Add(-1)
					if err := s.Unlock(ctx, name); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d times a holder entered while another was inside", n)
	}
	wantValue(t, instances[0], counter, []byte(strconv.Itoa(len(instances)*perInstance*rounds)))
}

// testLockNames: a held lock does not keep another name from being locked.
func testLockNames(t *testing.T, b Backend) {
	one, two := b.New(t), b.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if err := one.Lock(ctx, "issue_cert_x.example"); err != nil {
		t.Fatal(err)
	}
	if err := two.Lock(ctx, "issue_cert_y.example"); err != nil {
		t.Fatalf("Lock of another name while the first is held: %v", err)
	}
	for _, u := range []struct {
		s    certmagic.Storage
		name string
	}{{one, "issue_cert_x.example"}, {two, "issue_cert_y.example"}} {
		if err := u.s.Unlock(ctx, u.name); err != nil {
			t.Errorf("Unlock(%s): %v", u.name, err)
		}
	}
}

// testTryLock: for a TryLocker, TryLock reports a held lock as not obtained
// and obtains a free one.
func testTryLock(t *testing.T, b Backend) {
	one, two, three := b.New(t), b.New(t), b.New(t)
	tl2, ok2 := two.(certmagic.TryLocker)
	tl3, ok3 := three.(certmagic.TryLocker)
	if !ok2 || !ok3 {
		t.Skipf("%T is no certmagic.TryLocker", two)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	const name = "ari_try"
	if err := one.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got, err := tl2.TryLock(ctx, name); got || err != nil {
		t.Fatalf("TryLock of a held lock = %v, %v; want false, nil", got, err)
	}
	if err := one.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got, err := tl2.TryLock(ctx, name); !got || err != nil {
		t.Fatalf("TryLock of a released lock = %v, %v; want true, nil", got, err)
	}
	if got, err := tl3.TryLock(ctx, name); got || err != nil {
		t.Errorf("TryLock of a lock taken with TryLock = %v, %v; want false, nil", got, err)
	}
	if err := tl2.Unlock(ctx, name); err != nil {
		t.Errorf("Unlock after TryLock: %v", err)
	}
}

// lockAsync runs s.Lock in a goroutine and returns its result's channel.
func lockAsync(ctx context.Context, s certmagic.Storage, name string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Lock(ctx, name) }()
	return ch
}

// await returns what ch delivers, failing t if nothing comes within d.
func await(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
		return nil
	}
}

// testLockContext: a Lock waiting for a held lock returns when its context
// ends, by deadline or cancellation, with the context's error.
func testLockContext(t *testing.T, b Backend) {
	one, two := b.New(t), b.New(t)
	const name = "issue_cert_ctx.example"
	if err := one.Lock(t.Context(), name); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	err := await(t, lockAsync(ctx, two, name), patience, "Lock with a deadline, of a held lock,")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock of a held lock past its deadline: err = %v, want context.DeadlineExceeded", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	waiting := lockAsync(ctx, two, name)
	cancel()
	err = await(t, waiting, patience, "Lock of a held lock, cancelled,")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Lock of a held lock, cancelled: err = %v, want context.Canceled", err)
	}

	if err := one.Unlock(t.Context(), name); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// testUnlockLetsWaiterIn: Unlock hands the lock to an instance waiting for it,
// which then holds it against the first.
func testUnlockLetsWaiterIn(t *testing.T, b Backend) {
	one, two := b.New(t), b.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	const name = "issue_cert_handover.example"
	if err := one.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	waiting := lockAsync(ctx, two, name)
	if err := one.Unlock(ctx, name); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := await(t, waiting, patience, "Lock waiting for an unlocked lock"); err != nil {
		t.Fatalf("Lock waiting for an unlocked lock: %v", err)
	}

	short, cancelShort := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancelShort()
	if err := one.Lock(short, name); err == nil {
		t.Error("the first holder got the lock again while the waiter held it")
		_ = one.Unlock(ctx, name)
	}
	if err := two.Unlock(ctx, name); err != nil {
		t.Errorf("Unlock by the waiter: %v", err)
	}
}

// testHeldLockStaysFresh: a holder that lives keeps its lock past the time
// after which a crashed holder's lock is taken over.
func testHeldLockStaysFresh(t *testing.T, b Backend) {
	if b.StaleAfter <= 0 {
		t.Skip("the Backend does not say when locks go stale")
	}
	one, two := b.New(t), b.New(t)
	const name = "issue_cert_fresh.example"
	if err := one.Lock(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	wait := b.StaleAfter * 3 / 2
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	if err := two.Lock(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock of a lock held by a live holder, for %v: err = %v, want context.DeadlineExceeded", wait, err)
		if err == nil {
			_ = two.Unlock(t.Context(), name)
		}
	}
	if err := one.Unlock(t.Context(), name); err != nil {
		t.Errorf("Unlock by the holder after %v: %v", wait, err)
	}
}

// testStaleLockTakenOver: the lock of a holder that crashed goes to a waiter
// within StaleAfter (and half as much again), and is then a real lock.
func testStaleLockTakenOver(t *testing.T, b Backend) {
	if b.Crash == nil || b.StaleAfter <= 0 {
		t.Skip("the Backend cannot crash a holder")
	}
	dead, taker, third := b.New(t), b.New(t), b.New(t)
	const name = "issue_cert_stale.example"
	if err := dead.Lock(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	b.Crash(t, dead)

	wait := b.StaleAfter * 3 / 2
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	if err := taker.Lock(ctx, name); err != nil {
		t.Fatalf("Lock of a crashed holder's lock within %v: %v", wait, err)
	}

	short, cancelShort := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancelShort()
	if err := third.Lock(short, name); err == nil {
		t.Error("a third instance got the lock while the one that took it over held it")
		_ = third.Unlock(t.Context(), name)
	}
	if err := taker.Unlock(t.Context(), name); err != nil {
		t.Errorf("Unlock by the instance that took over: %v", err)
	}
}
