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
    ("i11b_job_name_claims", """
        CREATE TABLE job_name_claims (
            host TEXT NOT NULL,
            name TEXT NOT NULL,
            job_id TEXT NOT NULL REFERENCES jobs(id),
            claimed_at TEXT NOT NULL,
            PRIMARY KEY (host, name)
        );
    """),
]
