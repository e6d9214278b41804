package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a throwaway cluster of the suite's own (initdb into a
// temporary directory, a free loopback port), so it can be restarted with
// `pg_ctl restart -m immediate` without touching anyone else's database.
type Postgres struct {
	Port int
	URL  string // postgres://postgres@127.0.0.1:<port>/postgres

	bin   string // directory holding initdb, pg_ctl
	dir   string // owns data/, run/ and the log
	runAs []string
}

// StartPostgres initdbs a cluster and starts it. As root, initdb and pg_ctl
// run as the postgres user (Postgres refuses to run as root).
func StartPostgres(ctx context.Context, port int) (*Postgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "notifyd-chaos-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres: make cluster directory: %w", err)
	}
	p := &Postgres{Port: port, bin: bin, dir: dir,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			// As scripts/services does: Postgres will not run as root.
			if out, aerr := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home", "postgres").CombinedOutput(); aerr != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("postgres: running as root needs a postgres user to run the cluster as (%v); useradd: %v: %s", err, aerr, out)
			}
			if u, err = user.Lookup("postgres"); err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("postgres: %w", err)
			}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: chown %s: %w", dir, err)
		}
		p.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	if err := p.run(ctx, "mkdir", "-p", filepath.Join(dir, "run")); err != nil {
		p.Remove()
		return nil, err
	}
	if err := p.run(ctx, filepath.Join(bin, "initdb"), "-D", p.data(), "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		p.Remove()
		return nil, err
	}
	// fsync off: the suite tests crash recovery of notifyd, not of the disk;
	// an immediate restart still runs Postgres' WAL recovery.
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=300",
		port, filepath.Join(dir, "run"))
	if err := p.run(ctx, filepath.Join(bin, "pg_ctl"), "-D", p.data(), "-l", p.Log(), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		p.Remove()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

// Log is the server's log file.
func (p *Postgres) Log() string { return filepath.Join(p.dir, "postgres.log") }

// RestartImmediate is `pg_ctl restart -m immediate`: every backend dies
// without a checkpoint, as in a crash, and the server comes back after WAL
// recovery on the same port.
func (p *Postgres) RestartImmediate(ctx context.Context) error {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", p.data(), "-l", p.Log(), "-w", "-t", "60", "-m", "immediate", "restart")
}

// Stop shuts the server down at once.
func (p *Postgres) Stop(ctx context.Context) error {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", p.data(), "-w", "-t", "30", "-m", "immediate", "stop")
}

// Remove stops the server if it runs and deletes the cluster.
func (p *Postgres) Remove() {
	if _, err := os.Stat(filepath.Join(p.data(), "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = p.Stop(ctx)
		cancel()
	}
	os.RemoveAll(p.dir)
}

// CreateDatabase creates an empty database.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	c, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: create database %s: %w", name, err)
	}
	return nil
}

// DatabaseURL is the URL of database name on this cluster, at addr (the
// cluster's own port, or a proxy in front of it).
func (p *Postgres) DatabaseURL(addr, name string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, name)
}

func (p *Postgres) run(ctx context.Context, name string, args ...string) error {
	argv := append(append(append([]string{}, p.runAs...), name), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = os.TempDir() // the postgres user may not be able to read the test's cwd
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("postgres: %s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return nil
}

// postgresBin finds the directory with initdb and pg_ctl: Debian's
// /usr/lib/postgresql/<version>/bin (newest first), else $PATH.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestVer := "", -1
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil && v > bestVer {
			best, bestVer = d, v
		}
	}
	if best != "" {
		return best, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("postgres: initdb not found (looked in /usr/lib/postgresql/*/bin and $PATH); install postgresql (apt-get install postgresql)")
}
