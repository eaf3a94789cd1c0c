#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/adapters/sqlite_db.hpp>
#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/util/paths.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <utility>

namespace dljob::adapters {
namespace {

// 'DJOB': a file with another application_id is not ours and is refused.
constexpr std::int64_t application_id = 0x444A4F42;

// Each entry moves the schema from version i to i+1; never edit a released entry, add one.
constexpr std::array<std::string_view, 4> migrations{
    R"sql(
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    site TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    scheduler_id TEXT NOT NULL DEFAULT '',
    secondary_id TEXT NOT NULL DEFAULT '',
    run_dir TEXT NOT NULL DEFAULT '',
    script_path TEXT NOT NULL DEFAULT '',
    recipe_path TEXT NOT NULL DEFAULT '',
    phase TEXT NOT NULL,
    state TEXT NOT NULL,
    native_state TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    walltime_s INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    started_at INTEGER NOT NULL DEFAULT 0,
    finished_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
);
CREATE INDEX jobs_active ON jobs(state, phase);
CREATE UNIQUE INDEX jobs_scheduler_id ON jobs(site, scheduler_id) WHERE scheduler_id != '';
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    at INTEGER NOT NULL,
    state TEXT NOT NULL,
    native_state TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_job ON events(job_id);
CREATE TABLE metrics (
    job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    iter INTEGER NOT NULL,
    max_iter INTEGER NOT NULL,
    loss REAL, accuracy REAL, images_per_s REAL, elapsed_s REAL,
    final_status TEXT NOT NULL DEFAULT ''
);
CREATE TABLE polls (
    key TEXT PRIMARY KEY,
    last_poll_at INTEGER NOT NULL,
    interval_s INTEGER NOT NULL
);
)sql",
    // 2: continuations. The unique index makes a second continuation of one job impossible,
    // whichever dljob process tries it.
    R"sql(
ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN continues INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_continuations INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN submit_argv TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN progress_mark TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX jobs_continues ON jobs(continues) WHERE continues != 0;
ALTER TABLE metrics ADD COLUMN start_iter INTEGER NOT NULL DEFAULT 0;
)sql",
    // 3: dependencies (submit --after ID[:ok|any]) and sweeps (submit --sweep).
    R"sql(
ALTER TABLE jobs ADD COLUMN after_job INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN after_ok INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN sweep TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN sweep_point TEXT NOT NULL DEFAULT '[]';
)sql",
    // 4: the training's ranks (data-parallel dltrain), for status's per-rank throughput.
    R"sql(
ALTER TABLE metrics ADD COLUMN ranks INTEGER NOT NULL DEFAULT 1;
)sql",
};

// The adapter's one error boundary. Db/Stmt/Txn (sqlite_db.cpp) throw Failure because
// constructors and destructors cannot return Result; every public SqliteJobStore method runs its
// body through guarded(), which turns that Failure back into a Result at the JobStore interface.
// So no exception leaves this file, callers handle Result as everywhere else, and cli.cpp stays
// the only place that catches for the program. (The one other catch, in ~Txn, swallows a failed
// ROLLBACK: a destructor must not throw, and closing the connection rolls the transaction back.)
// Only Failure is caught here: anything else is a bug and reaches cli.cpp unchanged.
template <class F> auto guarded(F&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const Failure& failure) {
        return fail(failure.error());
    }
}

constexpr std::string_view job_columns =
    "id, token, name, site, scheduler, scheduler_id, secondary_id, run_dir, script_path, "
    "recipe_path, phase, state, native_state, reason, exit_code, walltime_s, created_at, "
    "started_at, finished_at, updated_at, attempt, continues, max_continuations, submit_argv, "
    "progress_mark, after_job, after_ok, sweep, sweep_point";

// The submit command as a JSON array of strings: any byte but NUL survives, in one column.
std::string encode_argv(const std::vector<std::string>& argv) {
    return nlohmann::json(argv).dump();
}

std::vector<std::string> decode_argv(const std::string& text) {
    auto json = nlohmann::json::parse(text, nullptr, false);
    std::vector<std::string> argv;
    if (json.is_array()) {
        for (const auto& word : json) {
            if (word.is_string()) {
                argv.push_back(word.get<std::string>());
            }
        }
    }
    return argv;
}

Job read_job(const Stmt& stmt) {
    Job job;
    job.id = stmt.int64(0);
    job.token = stmt.text(1);
    job.name = stmt.text(2);
    job.site = stmt.text(3);
    job.scheduler = stmt.text(4);
    job.scheduler_id = stmt.text(5);
    job.secondary_id = stmt.text(6);
    job.run_dir = stmt.text(7);
    job.script_path = stmt.text(8);
    job.recipe_path = stmt.text(9);
    job.phase = parse_submit_phase(stmt.text(10)).value_or(SubmitPhase::submit_unknown);
    job.state = parse_job_state(stmt.text(11)).value_or(JobState::unknown);
    job.native_state = stmt.text(12);
    job.reason = stmt.text(13);
    if (!stmt.is_null(14)) {
        job.exit_code = static_cast<int>(stmt.int64(14));
    }
    job.walltime_s = stmt.int64(15);
    job.created_at = stmt.int64(16);
    job.started_at = stmt.int64(17);
    job.finished_at = stmt.int64(18);
    job.updated_at = stmt.int64(19);
    job.attempt = static_cast<int>(stmt.int64(20));
    job.continues = stmt.int64(21);
    job.max_continuations = static_cast<int>(stmt.int64(22));
    job.submit_argv = decode_argv(stmt.text(23));
    job.progress_mark = stmt.text(24);
    job.after = stmt.int64(25);
    job.after_ok = stmt.int64(26) != 0;
    job.sweep = stmt.text(27);
    job.sweep_point = decode_argv(stmt.text(28));
    return job;
}

void migrate(Db& db) {
    Txn txn(db);
    auto app = db.prepare("PRAGMA application_id");
    const std::int64_t found_app = app.step() ? app.int64(0) : 0;
    auto version_stmt = db.prepare("PRAGMA user_version");
    const std::int64_t version = version_stmt.step() ? version_stmt.int64(0) : 0;
    if (found_app != 0 && found_app != application_id) {
        throw Failure(
            ErrorCode::store,
            fmt::format("{} is not a dljob job store (application_id {:#x})", db.path(), found_app),
            "set DLJOB_STORE to another file");
    }
    if (version > static_cast<std::int64_t>(migrations.size())) {
        throw Failure(ErrorCode::store,
                      fmt::format("{} has schema version {}, newer than this dljob's {}", db.path(),
                                  version, migrations.size()),
                      "use the newer dljob, or set DLJOB_STORE to another file");
    }
    for (auto i = static_cast<std::size_t>(version); i < migrations.size(); ++i) {
        db.exec(migrations.at(i));
    }
    db.exec(fmt::format("PRAGMA application_id={}", application_id));
    db.exec(fmt::format("PRAGMA user_version={}", migrations.size()));
    txn.commit();
}

} // namespace

int SqliteJobStore::schema_version() {
    return static_cast<int>(migrations.size());
}

SqliteJobStore::SqliteJobStore(std::unique_ptr<Db> db, bool wal)
    : m_db(std::move(db)), m_wal(wal) {}

SqliteJobStore::~SqliteJobStore() = default;

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::open(const std::filesystem::path& path,
                                                             const StoreOptions& options) {
    std::error_code ec;
    const auto dir = path.parent_path();
    if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        if (ec) {
            return fail(ErrorCode::store,
                        fmt::format("cannot create the job store's directory {}: {}", dir.string(),
                                    ec.message()),
                        "set DLJOB_STORE to a writable path");
        }
        ::chmod(dir.c_str(), 0700);
    }
    // WAL needs shared memory that network file systems do not give across nodes; a file
    // system statfs cannot name is treated as one of those.
    const FilesystemKind kind = filesystem_kind(path.string());
    const bool wal = options.wal.value_or(kind.known && !kind.network);
    return guarded([&]() -> Result<std::unique_ptr<SqliteJobStore>> {
        auto db = std::make_unique<Db>(
            path.string(), wal ? JournalMode::wal : JournalMode::rollback, options.busy_timeout_ms);
        ::chmod(path.c_str(), 0600);
        migrate(*db);
        return std::unique_ptr<SqliteJobStore>(new SqliteJobStore(std::move(db), wal));
    });
}

Result<Job> SqliteJobStore::create(const Job& job) {
    return guarded([&]() -> Result<Job> {
        Txn txn(*m_db);
        auto exists = m_db->prepare("SELECT 1 FROM jobs WHERE token = ?");
        exists.bind(job.token);
        if (exists.step()) {
            return fail(ErrorCode::store, fmt::format("a job with token {} exists", job.token));
        }
        if (job.continues != 0) {
            auto continued = m_db->prepare("SELECT id FROM jobs WHERE continues = ?");
            continued.bind(job.continues);
            if (continued.step()) {
                return fail(ErrorCode::store, fmt::format("job {} is already continued by job {}",
                                                          job.continues, continued.int64(0)));
            }
        }
        auto insert = m_db->prepare(
            "INSERT INTO jobs (token, name, site, scheduler, run_dir, script_path, recipe_path, "
            "phase, state, walltime_s, created_at, updated_at, attempt, continues, "
            "max_continuations, submit_argv, progress_mark, after_job, after_ok, sweep, "
            "sweep_point) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        insert.bind(job.token)
            .bind(job.name)
            .bind(job.site)
            .bind(job.scheduler)
            .bind(job.run_dir)
            .bind(job.script_path)
            .bind(job.recipe_path)
            .bind(to_string(SubmitPhase::submitting))
            .bind(to_string(JobState::pending))
            .bind(job.walltime_s)
            .bind(job.created_at)
            .bind(job.created_at)
            .bind(static_cast<std::int64_t>(job.attempt))
            .bind(job.continues)
            .bind(static_cast<std::int64_t>(job.max_continuations))
            .bind(encode_argv(job.submit_argv))
            .bind(job.progress_mark)
            .bind(job.after)
            .bind(static_cast<std::int64_t>(job.after_ok ? 1 : 0))
            .bind(job.sweep)
            .bind(encode_argv(job.sweep_point));
        insert.run();
        Job created = job;
        created.id = m_db->last_insert_id();
        created.phase = SubmitPhase::submitting;
        created.state = JobState::pending;
        created.updated_at = job.created_at;
        auto event = m_db->prepare(
            "INSERT INTO events (job_id, at, state, native_state, reason) VALUES (?, ?, ?, ?, ?)");
        event.bind(created.id)
            .bind(job.created_at)
            .bind(to_string(JobState::pending))
            .bind(std::string_view("submitting"))
            .bind(std::string_view(""));
        event.run();
        txn.commit();
        return created;
    });
}

Result<void> SqliteJobStore::mark_submitted(std::int64_t id, const std::string& scheduler_id,
                                            const std::string& secondary_id, std::int64_t now) {
    return guarded([&]() -> Result<void> {
        Txn txn(*m_db);
        // An id the scheduler hands out is not in use by any other job: an older row holding
        // it names a job that no longer exists there (a local pid reused once its group was
        // gone, a Slurm id after MaxJobId wrapped). That row keeps it as "<id>~<row id>", which
        // no scheduler lists, so its own exit_code file decides how it ended.
        if (!scheduler_id.empty()) {
            auto retire = m_db->prepare(
                "UPDATE jobs SET scheduler_id = scheduler_id || '~' || id WHERE scheduler_id = ? "
                "AND id != ? AND site = (SELECT site FROM jobs WHERE id = ?)");
            retire.bind(scheduler_id).bind(id).bind(id);
            retire.run();
        }
        auto update = m_db->prepare("UPDATE jobs SET phase = ?, scheduler_id = ?, "
                                    "secondary_id = ?, updated_at = ? WHERE id = ?");
        update.bind(to_string(SubmitPhase::submitted))
            .bind(scheduler_id)
            .bind(secondary_id)
            .bind(now)
            .bind(id);
        update.run();
        if (m_db->changes() == 0) {
            return fail(ErrorCode::not_found, fmt::format("no job {} in the store", id));
        }
        txn.commit();
        return {};
    });
}

Result<void> SqliteJobStore::mark_submit_unknown(std::int64_t id, std::int64_t now) {
    return guarded([&]() -> Result<void> {
        Txn txn(*m_db);
        auto update = m_db->prepare("UPDATE jobs SET phase = ?, updated_at = ? WHERE id = ?");
        update.bind(to_string(SubmitPhase::submit_unknown)).bind(now).bind(id);
        update.run();
        txn.commit();
        return {};
    });
}

Result<void> SqliteJobStore::remove(std::int64_t id) {
    return guarded([&]() -> Result<void> {
        Txn txn(*m_db);
        auto del = m_db->prepare("DELETE FROM jobs WHERE id = ?");
        del.bind(id);
        del.run();
        txn.commit();
        return {};
    });
}

Result<bool> SqliteJobStore::update_state(std::int64_t id, const SchedulerStatus& status,
                                          std::int64_t now) {
    return guarded([&]() -> Result<bool> {
        Txn txn(*m_db);
        auto current = m_db->prepare(fmt::format("SELECT {} FROM jobs WHERE id = ?", job_columns));
        current.bind(id);
        if (!current.step()) {
            return fail(ErrorCode::not_found, fmt::format("no job {} in the store", id));
        }
        const Job job = read_job(current);
        if (is_terminal(job.state)) {
            return false; // a finished job's outcome is final; late scheduler noise is ignored
        }
        const bool changed =
            job.state != status.state ||
            (!status.secondary_id.empty() && status.secondary_id != job.secondary_id) ||
            job.native_state != status.native_state || job.reason != status.reason ||
            job.exit_code != status.exit_code;
        if (!changed) {
            return false;
        }
        std::int64_t started = job.started_at;
        if (status.state == JobState::running || is_terminal(status.state)) {
            if (status.started_at > 0) {
                started = status.started_at;
            } else if (started == 0) {
                // Not seen running and no start of its own: no earlier than its end.
                started = is_terminal(status.state) && status.finished_at > 0
                              ? std::min(status.finished_at, now)
                              : now;
            }
        }
        std::int64_t finished = 0;
        if (is_terminal(status.state)) {
            finished = status.finished_at > 0 ? std::max(status.finished_at, started) : now;
        }
        // Compare-and-swap on the state read above: two dljob processes cannot both advance it.
        auto update =
            m_db->prepare("UPDATE jobs SET state = ?, native_state = ?, reason = ?, exit_code = ?, "
                          "started_at = ?, finished_at = ?, updated_at = ?, "
                          "secondary_id = CASE WHEN ? != '' THEN ? ELSE secondary_id END "
                          "WHERE id = ? AND state = ?");
        std::optional<std::int64_t> exit_code;
        if (status.exit_code) {
            exit_code = *status.exit_code;
        }
        update.bind(to_string(status.state))
            .bind(status.native_state)
            .bind(status.reason)
            .bind(exit_code)
            .bind(started)
            .bind(finished)
            .bind(now)
            .bind(status.secondary_id)
            .bind(status.secondary_id)
            .bind(id)
            .bind(to_string(job.state));
        update.run();
        if (m_db->changes() == 0) {
            return false;
        }
        if (job.state != status.state || job.reason != status.reason) {
            auto event = m_db->prepare("INSERT INTO events (job_id, at, state, native_state, "
                                       "reason) VALUES (?, ?, ?, ?, ?)");
            event.bind(id)
                .bind(now)
                .bind(to_string(status.state))
                .bind(status.native_state)
                .bind(status.reason);
            event.run();
        }
        txn.commit();
        return true;
    });
}

Result<void> SqliteJobStore::update_metrics(std::int64_t id, const JobMetrics& metrics) {
    return guarded([&]() -> Result<void> {
        Txn txn(*m_db);
        auto upsert = m_db->prepare(
            "INSERT INTO metrics (job_id, iter, max_iter, loss, accuracy, images_per_s, "
            "elapsed_s, final_status, start_iter, ranks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(job_id) DO "
            "UPDATE SET iter = excluded.iter, max_iter = excluded.max_iter, loss = excluded.loss, "
            "accuracy = excluded.accuracy, images_per_s = excluded.images_per_s, "
            "elapsed_s = excluded.elapsed_s, final_status = excluded.final_status, "
            "start_iter = excluded.start_iter, ranks = excluded.ranks");
        upsert.bind(id)
            .bind(metrics.iter)
            .bind(metrics.max_iter)
            .bind(metrics.loss)
            .bind(metrics.accuracy)
            .bind(metrics.images_per_s)
            .bind(metrics.elapsed_s)
            .bind(metrics.final_status)
            .bind(metrics.start_iter)
            .bind(static_cast<std::int64_t>(metrics.ranks));
        upsert.run();
        txn.commit();
        return {};
    });
}

Result<std::optional<Job>> SqliteJobStore::find(std::int64_t id) {
    return guarded([&]() -> Result<std::optional<Job>> {
        auto stmt = m_db->prepare(fmt::format("SELECT {} FROM jobs WHERE id = ?", job_columns));
        stmt.bind(id);
        if (!stmt.step()) {
            return std::optional<Job>{};
        }
        return std::optional<Job>{read_job(stmt)};
    });
}

Result<std::optional<Job>> SqliteJobStore::find_by_token(const std::string& token) {
    return guarded([&]() -> Result<std::optional<Job>> {
        auto stmt = m_db->prepare(fmt::format("SELECT {} FROM jobs WHERE token = ?", job_columns));
        stmt.bind(token);
        if (!stmt.step()) {
            return std::optional<Job>{};
        }
        return std::optional<Job>{read_job(stmt)};
    });
}

Result<std::optional<Job>> SqliteJobStore::continuation_of(std::int64_t id) {
    return guarded([&]() -> Result<std::optional<Job>> {
        auto stmt =
            m_db->prepare(fmt::format("SELECT {} FROM jobs WHERE continues = ?", job_columns));
        stmt.bind(id);
        if (!stmt.step()) {
            return std::optional<Job>{};
        }
        return std::optional<Job>{read_job(stmt)};
    });
}

Result<std::vector<Job>> SqliteJobStore::list(const JobQuery& query) {
    return guarded([&]() -> Result<std::vector<Job>> {
        std::string sql = fmt::format("SELECT {} FROM jobs WHERE 1", job_columns);
        if (query.active_only) {
            sql += " AND (phase != 'submitted' OR state IN ('PENDING', 'RUNNING', 'UNKNOWN'))";
        }
        if (!query.scheduler.empty()) {
            sql += " AND scheduler = ?";
        }
        sql += " ORDER BY id DESC";
        if (query.limit > 0) {
            sql += fmt::format(" LIMIT {}", query.limit);
        }
        auto stmt = m_db->prepare(sql);
        if (!query.scheduler.empty()) {
            stmt.bind(query.scheduler);
        }
        std::vector<Job> jobs;
        while (stmt.step()) {
            jobs.push_back(read_job(stmt));
        }
        return jobs;
    });
}

Result<std::vector<JobEvent>> SqliteJobStore::events(std::int64_t id) {
    return guarded([&]() -> Result<std::vector<JobEvent>> {
        auto stmt = m_db->prepare("SELECT job_id, at, state, native_state, reason FROM events "
                                  "WHERE job_id = ? ORDER BY id");
        stmt.bind(id);
        std::vector<JobEvent> events;
        while (stmt.step()) {
            events.push_back(JobEvent{stmt.int64(0), stmt.int64(1),
                                      parse_job_state(stmt.text(2)).value_or(JobState::unknown),
                                      stmt.text(3), stmt.text(4)});
        }
        return events;
    });
}

namespace {

JobMetrics read_metrics(const Stmt& stmt) {
    JobMetrics m;
    m.iter = stmt.int64(0);
    m.max_iter = stmt.int64(1);
    auto real = [&](int column) -> std::optional<double> {
        return stmt.is_null(column) ? std::nullopt : std::optional<double>(stmt.real(column));
    };
    m.loss = real(2);
    m.accuracy = real(3);
    m.images_per_s = real(4);
    m.elapsed_s = real(5);
    m.final_status = stmt.text(6);
    m.start_iter = stmt.int64(7);
    m.ranks = static_cast<int>(stmt.int64(8));
    return m;
}

} // namespace

Result<std::optional<JobMetrics>> SqliteJobStore::metrics(std::int64_t id) {
    return guarded([&]() -> Result<std::optional<JobMetrics>> {
        auto stmt = m_db->prepare("SELECT iter, max_iter, loss, accuracy, images_per_s, "
                                  "elapsed_s, final_status, start_iter, ranks FROM metrics "
                                  "WHERE job_id = ?");
        stmt.bind(id);
        if (!stmt.step()) {
            return std::optional<JobMetrics>{};
        }
        return std::optional<JobMetrics>{read_metrics(stmt)};
    });
}

Result<std::map<std::int64_t, JobMetrics>> SqliteJobStore::all_metrics() {
    return guarded([&]() -> Result<std::map<std::int64_t, JobMetrics>> {
        auto stmt =
            m_db->prepare("SELECT iter, max_iter, loss, accuracy, images_per_s, "
                          "elapsed_s, final_status, start_iter, ranks, job_id FROM metrics");
        std::map<std::int64_t, JobMetrics> all;
        while (stmt.step()) {
            all.emplace(stmt.int64(9), read_metrics(stmt));
        }
        return all;
    });
}

Result<PollSlot> SqliteJobStore::claim_poll(const std::string& key, std::int64_t now,
                                            std::int64_t min_interval_s) {
    return guarded([&]() -> Result<PollSlot> {
        Txn txn(*m_db);
        auto stmt = m_db->prepare("SELECT last_poll_at, interval_s FROM polls WHERE key = ?");
        stmt.bind(key);
        PollSlot slot;
        if (stmt.step()) {
            const std::int64_t last = stmt.int64(0);
            const std::int64_t interval = std::max(stmt.int64(1), min_interval_s);
            slot.interval_s = interval;
            if (now < last + interval) {
                slot.next_poll_at = last + interval;
                return slot; // someone polled recently: use what they stored
            }
            auto update = m_db->prepare("UPDATE polls SET last_poll_at = ? WHERE key = ?");
            update.bind(now).bind(key);
            update.run();
        } else {
            auto insert =
                m_db->prepare("INSERT INTO polls (key, last_poll_at, interval_s) VALUES (?, ?, ?)");
            insert.bind(key).bind(now).bind(min_interval_s);
            insert.run();
            slot.interval_s = min_interval_s;
        }
        txn.commit();
        slot.granted = true;
        slot.next_poll_at = now + slot.interval_s;
        return slot;
    });
}

Result<void> SqliteJobStore::record_poll(const std::string& key, bool changed, bool failed,
                                         std::int64_t min_interval_s, std::int64_t max_interval_s) {
    return guarded([&]() -> Result<void> {
        Txn txn(*m_db);
        auto stmt = m_db->prepare("SELECT interval_s FROM polls WHERE key = ?");
        stmt.bind(key);
        std::int64_t interval = stmt.step() ? stmt.int64(0) : min_interval_s;
        if (changed && !failed) {
            interval = min_interval_s;
        } else {
            // Nothing new (or an error): back off by 1.5x up to the cap.
            interval = std::min(max_interval_s, std::max(min_interval_s, interval * 3 / 2));
        }
        auto update = m_db->prepare("UPDATE polls SET interval_s = ? WHERE key = ?");
        update.bind(interval).bind(key);
        update.run();
        txn.commit();
        return {};
    });
}

} // namespace dljob::adapters
