"""Named, append-only schema migrations. Never edit or reorder one that has shipped: add a new one."""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    ("0001_hosts_audits", """
        CREATE TABLE hosts (
            name TEXT PRIMARY KEY,
            target TEXT NOT NULL,
            platform TEXT,
            instance_id TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE audits (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            host TEXT NOT NULL,
            platform TEXT,
            at TEXT NOT NULL,
            verdict TEXT NOT NULL,
            report_json TEXT NOT NULL
        );
        CREATE INDEX audits_host ON audits(host, at);
    """),
    ("0002_jobs", """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            name TEXT NOT NULL,
            backend TEXT NOT NULL,
            state TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            previous_id TEXT,
            command TEXT NOT NULL,
            workdir TEXT NOT NULL,
            run_dir TEXT NOT NULL,
            script_sha TEXT NOT NULL DEFAULT '',
            handle_json TEXT NOT NULL DEFAULT '{}',
            spec_json TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            finished_at TEXT,
            exit_code INTEGER,
            exit_signal TEXT,
            log_offset INTEGER NOT NULL DEFAULT 0,
            last_patrol_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX jobs_host_name ON jobs(host, name);
        CREATE INDEX jobs_state ON jobs(state);
        CREATE TABLE job_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL REFERENCES jobs(id),
            at TEXT NOT NULL,
            kind TEXT NOT NULL,
            state TEXT,
            detail_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX job_events_job ON job_events(job_id, id);
    """),
    ("0003_confirmations_audit_log", """
        CREATE TABLE tokens (
            nonce TEXT PRIMARY KEY,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            issued_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            used_at TEXT
        );
        CREATE TABLE audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            event TEXT NOT NULL,
            action TEXT,
            target TEXT,
            detail_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
            BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
        CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
            BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    """),
    ("0004_manifests", """
        CREATE TABLE manifests (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT,
            host TEXT NOT NULL,
            at TEXT NOT NULL,
            dest TEXT NOT NULL,
            all_ok INTEGER NOT NULL,
            newest_remote_ckpt TEXT,
            newest_remote_mtime REAL,
            manifest_json TEXT NOT NULL
        );
        CREATE INDEX manifests_job ON manifests(job_id, id);
        CREATE INDEX manifests_host ON manifests(host, id);
    """),
    ("0005_guards", """
        CREATE TABLE guards (
            host TEXT PRIMARY KEY,
            guard_dir TEXT NOT NULL,
            pid INTEGER,
            armed_at TEXT NOT NULL,
            deadline REAL,
            idle_s REAL,
            grace_s REAL NOT NULL,
            interval_s REAL NOT NULL,
            stop TEXT NOT NULL,
            events_offset INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
    """),
    ("0006_human_gate", """
        CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            phrase TEXT NOT NULL,
            expect TEXT NOT NULL,
            summary_json TEXT NOT NULL DEFAULT '[]',
            snapshot TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            expires_at REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            decided_at TEXT,
            decided_via TEXT,
            totp_ok INTEGER NOT NULL DEFAULT 0,
            requester_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX approvals_status ON approvals(status, expires_at);
        CREATE TABLE totp_failures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL
        );
        ALTER TABLE audit_log ADD COLUMN hash TEXT;
        CREATE TRIGGER audit_log_chained BEFORE INSERT ON audit_log WHEN NEW.hash IS NULL
            BEGIN SELECT RAISE(ABORT, 'audit_log rows must carry their chain hash'); END;
        CREATE TABLE audit_anchor (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            from_id INTEGER NOT NULL,
            prev_hash TEXT NOT NULL,
            note TEXT NOT NULL
        );
        INSERT INTO audit_anchor(at, from_id, prev_hash, note)
            SELECT strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), COALESCE(MAX(id), 0) + 1, 'genesis',
                   'hash chain starts; earlier rows are unchained' FROM audit_log;
    """),
    # A job's required outputs (what the teardown gate demands a verified manifest of) are fixed at launch.
    ("0007_required_outputs_immutable", """
        CREATE TRIGGER jobs_outputs_fixed BEFORE UPDATE OF spec_json ON jobs
            WHEN json_extract(old.spec_json, '$.outputs') IS NOT json_extract(new.spec_json, '$.outputs')
              OR json_extract(old.spec_json, '$.outputs_declared') IS NOT json_extract(new.spec_json, '$.outputs_declared')
            BEGIN SELECT RAISE(ABORT, 'a job''s required outputs are fixed at launch'); END;
    """),
    ("0008_job_name_claims", """
        CREATE TABLE job_name_claims (
            host TEXT NOT NULL,
            name TEXT NOT NULL,
            job_id TEXT NOT NULL REFERENCES jobs(id),
            claimed_at TEXT NOT NULL,
            PRIMARY KEY (host, name)
        );
    """),
]
