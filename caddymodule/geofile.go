package caddymodule

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// The database files of geoip and asn_db, one mechanism for both: opened
// once per file and shared across reloads (geoDatabases), and, with
// geoip_check_interval, checked on disk and read again when they change
// (watchedDB.checkFile).

// geoDatabases holds the open geoip and ASN databases, process-wide, so
// that a config reload that names the same unchanged file shares the open
// one instead of reading it again. A database is closed when the last
// config using it is cleaned up.
var geoDatabases = caddy.NewUsagePool()

// geoFile identifies a database file as it is on disk, and as what it is
// read: a reload that finds the file changed (rebuilt, or replaced by a
// newer release) opens it anew.
type geoFile struct {
	path     string
	asn      bool // read as an ASN database (asn_db), not a country one
	size     int64
	modified time.Time
}

// pooledDB is an open database in the pool.
type pooledDB[T interface{ Close() error }] struct{ db T }

// Destruct closes the database when its last user is gone.
func (p pooledDB[T]) Destruct() error { return p.db.Close() }

// openPooled returns the database at path, read by open (as an ASN
// database if asn), shared with earlier configs if the file has not
// changed since they opened it, and the pool key to release.
func openPooled[T interface{ Close() error }](path string, asn bool, open func(string) (T, error)) (T, geoFile, error) {
	key := geoFile{path: path, asn: asn}
	if fi, err := os.Stat(path); err == nil {
		key.size, key.modified = fi.Size(), fi.ModTime()
	}
	v, _, err := geoDatabases.LoadOrNew(key, func() (caddy.Destructor, error) {
		db, err := open(path)
		if err != nil {
			return nil, err
		}
		return pooledDB[T]{db}, nil
	})
	if err != nil {
		var zero T
		return zero, key, err
	}
	return v.(pooledDB[T]).db, key, nil
}

// release releases a database's key in geoDatabases, once: *file is nil
// after.
func release(file **geoFile) error {
	if *file == nil {
		return nil
	}
	_, err := geoDatabases.Delete(**file)
	*file = nil
	return err
}

// geoDB is what a database file is read into: *geo.DB (geoip) or
// *geo.ASNDB (asn_db).
type geoDB[D any] interface {
	*D
	Close() error
}

// watchedDB is a database file in force: the database read from it,
// swapped by checkFile when the file changes. Readers Load it once per
// lookup; a swap lets those holding the old one finish with it (Close
// frees nothing they use).
type watchedDB[D any, P geoDB[D]] struct {
	name   string                  // "geoip database" or "ASN database", for the logs
	open   func(string) (P, error) // reads a file
	fields func(P) []zap.Field     // what the logs say of a database read
	logger *zap.Logger

	db   atomic.Pointer[D]
	file *geoFile // its key in geoDatabases, to release; nil once released
	seen geoFile  // the file as last read, for checkFile
}

// openWatched opens the database at path (global placeholders replaced),
// read by open as an ASN database if asn, shared through geoDatabases,
// and logs that it is in force.
func openWatched[D any, P geoDB[D]](name, path string, asn bool, open func(string) (P, error), fields func(P) []zap.Field, logger *zap.Logger) (*watchedDB[D, P], error) {
	db, file, err := openPooled(caddy.NewReplacer().ReplaceKnown(path, ""), asn, open)
	if err != nil {
		return nil, err
	}
	w := &watchedDB[D, P]{name: name, open: open, fields: fields, logger: logger, file: &file, seen: file}
	w.db.Store(db)
	logger.Info(name, append([]zap.Field{zap.String("path", file.path)}, fields(db)...)...)
	return w, nil
}

// load is the database in force; nil for a nil w.
func (w *watchedDB[D, P]) load() P {
	if w == nil {
		return nil
	}
	return w.db.Load()
}

// cleanup releases the database's key in geoDatabases; nothing for a nil
// w.
func (w *watchedDB[D, P]) cleanup() error {
	if w == nil {
		return nil
	}
	return release(&w.file)
}

// checkFile reads the file again if its size or modification time changed
// since it was last read, and puts the new database in force. It reports
// whether it did. A file that cannot be read is logged, not again until
// it changes again; the database in force stays. Nothing for a nil w.
func (w *watchedDB[D, P]) checkFile() bool {
	if w == nil || w.file == nil {
		return false
	}
	path := w.seen.path
	fi, err := os.Stat(path)
	if err != nil {
		w.logger.Error(w.name+": checking the file", zap.String("path", path), zap.Error(err))
		return false
	}
	if fi.Size() == w.seen.size && fi.ModTime().Equal(w.seen.modified) {
		return false
	}
	w.seen.size, w.seen.modified = fi.Size(), fi.ModTime()
	db, err := w.open(path)
	if err != nil {
		w.logger.Error(w.name+" changed but cannot be read; the one in force stays", zap.String("path", path), zap.Error(err))
		return false
	}
	w.db.Store(db)
	w.logger.Info(w.name+" changed on disk and was read again", append([]zap.Field{zap.String("path", path)}, w.fields(db)...)...)
	return true
}
