#pragma once
// JobStore on one SQLite file (docs/job-store.md): schema migrations by user_version, an
// application_id so a foreign file is refused, a rollback journal on network file systems and
// WAL only on local disks, a busy timeout and BEGIN IMMEDIATE for every write.

#include <dljob/domain/job_store.hpp>

#include <filesystem>
#include <memory>

namespace dljob::adapters {

class Db;

struct StoreOptions {
    int busy_timeout_ms = 60000;
    /// nullopt: decide by the file system (WAL on local disks, rollback journal elsewhere).
    std::optional<bool> wal;
};

class SqliteJobStore final : public JobStore {
public:
    /// Opens or creates the store, creating its directory (0700) and migrating the schema.
    static Result<std::unique_ptr<SqliteJobStore>> open(const std::filesystem::path& path,
                                                        const StoreOptions& options = {});
    ~SqliteJobStore() override;
    SqliteJobStore(const SqliteJobStore&) = delete;
    SqliteJobStore& operator=(const SqliteJobStore&) = delete;
    SqliteJobStore(SqliteJobStore&&) = delete;
    SqliteJobStore& operator=(SqliteJobStore&&) = delete;

    Result<Job> create(const Job& job) override;
    Result<void> mark_submitted(std::int64_t id, const std::string& scheduler_id,
                                const std::string& secondary_id, std::int64_t now) override;
    Result<void> mark_submit_unknown(std::int64_t id, std::int64_t now) override;
    Result<void> remove(std::int64_t id) override;
    Result<bool> update_state(std::int64_t id, const SchedulerStatus& status,
                              std::int64_t now) override;
    Result<void> update_metrics(std::int64_t id, const JobMetrics& metrics) override;
    Result<std::optional<Job>> find(std::int64_t id) override;
    Result<std::optional<Job>> find_by_token(const std::string& token) override;
    Result<std::optional<Job>> continuation_of(std::int64_t id) override;
    Result<std::vector<Job>> list(const JobQuery& query) override;
    Result<std::vector<JobEvent>> events(std::int64_t id) override;
    Result<std::optional<JobMetrics>> metrics(std::int64_t id) override;
    Result<std::map<std::int64_t, JobMetrics>> all_metrics() override;
    Result<PollSlot> claim_poll(const std::string& key, std::int64_t now,
                                std::int64_t min_interval_s) override;
    Result<void> record_poll(const std::string& key, bool changed, bool failed,
                             std::int64_t min_interval_s, std::int64_t max_interval_s) override;

    /// Whether the store runs in WAL mode (for tests and `dljob show --debug`).
    [[nodiscard]] bool wal() const { return m_wal; }
    /// The schema version this dljob writes.
    static int schema_version();

private:
    SqliteJobStore(std::unique_ptr<Db> db, bool wal);
    std::unique_ptr<Db> m_db;
    bool m_wal = false;
};

} // namespace dljob::adapters
