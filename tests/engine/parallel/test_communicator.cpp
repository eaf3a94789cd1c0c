// Rank detection from the launchers' environments, the one-rank communicator, and the run
// directory lock (docs/data-parallel.md). Multi-rank runs of the real binary are in
// test_data_parallel.cpp.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"
#include "train/run_dir_lock.hpp"

#include <dl/communicator.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <map>
#include <string>

namespace {

dl::RankEnv detect(const std::map<std::string, std::string>& vars) {
    return dl::detect_rank_env([&vars](const char* name) -> const char* {
        const auto found = vars.find(name);
        return found == vars.end() ? nullptr : found->second.c_str();
    });
}

TEST(RankEnv, NoLauncherIsOneRankThatLoadsNoMpi) {
    const auto env = detect({});
    EXPECT_EQ(env.rank, 0);
    ASSERT_TRUE(env.size.has_value());
    EXPECT_EQ(*env.size, 1);
    EXPECT_FALSE(env.distributed());
    EXPECT_EQ(env.launcher, "");
}

TEST(RankEnv, OpenMpisMpirun) {
    const auto env = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                             {"OMPI_COMM_WORLD_SIZE", "4"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
    EXPECT_EQ(env.launcher, "openmpi");
    EXPECT_EQ(env.rank, 3);
    EXPECT_EQ(env.size.value_or(-1), 4);
    EXPECT_EQ(env.local_rank, 1);
    EXPECT_TRUE(env.distributed());
    EXPECT_NE(env.evidence.find("OMPI_COMM_WORLD_SIZE=4"), std::string::npos) << env.evidence;
}

TEST(RankEnv, MpichsHydra) {
    const auto env = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}});
    EXPECT_EQ(env.launcher, "mpich");
    EXPECT_EQ(env.rank, 1);
    EXPECT_EQ(env.size.value_or(-1), 2);
    EXPECT_EQ(env.local_rank, 1);
}

TEST(RankEnv, SrunsStepNotTheBatchScript) {
    const auto step = detect({{"SLURM_PROCID", "5"},
                              {"SLURM_STEP_NUM_TASKS", "8"},
                              {"SLURM_NTASKS", "8"},
                              {"SLURM_LOCALID", "1"}});
    EXPECT_EQ(step.launcher, "slurm");
    EXPECT_EQ(step.rank, 5);
    EXPECT_EQ(step.size.value_or(-1), 8);
    EXPECT_EQ(step.local_rank, 1);
    // The batch script of a job that asked for 8 tasks runs as one process, not rank 0 of 8.
    const auto script = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}});
    EXPECT_FALSE(script.distributed());
}

TEST(RankEnv, AprunGivesTheRankOnlySoMpiMustSayTheSize) {
    const auto env = detect({{"ALPS_APP_PE", "2"}});
    EXPECT_EQ(env.launcher, "alps");
    EXPECT_EQ(env.rank, 2);
    EXPECT_FALSE(env.size.has_value());
    EXPECT_TRUE(env.distributed());
}

TEST(RankEnv, TheMostSpecificLauncherWins) {
    // mpirun inside a Slurm allocation: Open MPI's variables, not the allocation's.
    const auto env = detect({{"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"SLURM_PROCID", "0"},
                             {"SLURM_STEP_NUM_TASKS", "1"}});
    EXPECT_EQ(env.launcher, "openmpi");
    EXPECT_EQ(env.rank, 1);
}

TEST(RankEnv, NonsenseIsAnErrorNamingTheVariable) {
    try {
        detect({{"PMI_RANK", "one"}, {"PMI_SIZE", "2"}});
        FAIL() << "expected an error";
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::usage);
        EXPECT_NE(std::string(e.what()).find("PMI_RANK='one'"), std::string::npos) << e.what();
    }
    try {
        detect({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
        FAIL() << "expected an error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 2 of 2"), std::string::npos) << e.what();
    }
}

TEST(Communicator, OneRankReturnsItsInput) {
    const auto comm = dl::make_communicator(detect({}));
    EXPECT_EQ(comm->name(), "single");
    EXPECT_EQ(comm->size(), 1);
    float values[] = {1.5F, -2.0F};
    comm->allreduce_sum(values, 2, "test");
    EXPECT_EQ(values[0], 1.5F);
    EXPECT_EQ(values[1], -2.0F);
}

TEST(RunDirLock, ASecondHolderIsRefusedNamingTheFirst) {
    const dl_test::TempDir dir;
    const dl::RunDirLock first(dir.path());
    // flock is per open file: a second open in this process conflicts as another process would.
    try {
        const dl::RunDirLock second(dir.path());
        FAIL() << "expected the second lock to be refused";
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::usage);
        const std::string message = e.what();
        EXPECT_NE(message.find("is in use by another training"), std::string::npos) << message;
        EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
    }
}

TEST(RunDirLock, ReleasedWhenTheHolderDiesEvenBySigkill) {
    const dl_test::TempDir dir;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        const dl::RunDirLock held(dir.path());
        (void)!::write(ready[1], "x", 1);
        ::pause();
        ::_exit(0);
    }
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    EXPECT_THROW(dl::RunDirLock(dir.path()), dl::Error);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_NO_THROW(dl::RunDirLock(dir.path()));
    ::close(ready[0]);
    ::close(ready[1]);
}

} // namespace

namespace {

TEST(RunDirLock, ASecondDltrainOnABusyRunDirectoryIsRefusedAndTheFirstGoesOn) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 1000000);
    const auto run = dir.path() / "run";
    const std::string train = std::string(DLTRAIN_BINARY) + " train --device cpu --threads 1 " +
                              "--deadline none --config " + config.string() + " --run-dir " +
                              run.string();
    const std::string script =
        train + " >/dev/null 2>&1 & first=$!; for i in $(seq 1 400); do grep -q '\"train\"' " +
        (run / "metrics.jsonl").string() + " 2>/dev/null && break; sleep 0.05; done; " + train +
        "; echo second=$?; kill -TERM $first; wait $first; echo first=$?";
    const auto result = dljob::test::run_shell("sh -c '" + script + "'");
    EXPECT_NE(result.output.find("second=2"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("is in use by another training (pid "), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("first=75"), std::string::npos) << result.output;
}

} // namespace

namespace {

std::string tiny_train(const dl_test::TempDir& dir, const std::string& run) {
    const auto config = dl_test::make_tiny_workspace(dir.path(), 3);
    return std::string(DLTRAIN_BINARY) + " train --device cpu --threads 1 --deadline none " +
           "--config " + config.string() + " --run-dir " + (dir.path() / run).string();
}

// One rank never maps an MPI library: a node without MPI, or with a broken module, trains as
// it always did.
TEST(MpiPlugin, OneRankLoadsNoMpi) {
    const dl_test::TempDir dir;
    const auto run = dljob::test::run_shell("LD_DEBUG=files " + tiny_train(dir, "run"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (const char* library : {"libdltrain-mpi", "libmpi", "libmpich"}) {
        EXPECT_EQ(run.output.find(std::string("file=") + library), std::string::npos)
            << library << " was loaded by a one-rank run";
    }
}

// Ranks asked for by the environment but no plugin to join them: exit 2 naming what was tried,
// before anything is written, instead of N trainings of one rank on one run directory.
TEST(MpiPlugin, RanksWithoutAPluginAreRefusedSayingWhatWasTried) {
    const dl_test::TempDir dir;
    const auto missing = dir.path() / "libdltrain-mpi-nowhere.so";
    const auto run = dljob::test::run_shell(
        "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 DLTRAIN_MPI_PLUGIN=" + missing.string() +
        " " + tiny_train(dir, "run"));
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find("the launcher started 2 ranks (OMPI_COMM_WORLD_RANK=0 "
                              "OMPI_COMM_WORLD_SIZE=2) but no MPI plugin of dltrain loads"),
              std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find(missing.string() + ": not there"), std::string::npos) << run.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "run")) << "nothing written";
}

} // namespace
