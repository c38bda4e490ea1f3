#include "launcher/download.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/durable_file.h"
#include "base/progress.h"
#include "base/status_macros.h"
#include "checkpoint/checklist.h"
#include "launcher/file_fetcher.h"
#include "launcher/presigned_url.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs info;
  if (statvfs(dir.c_str(), &info) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
}

absl::StatusOr<std::vector<ChecklistEntry>> Checklist(FileFetcher& d, const std::string& relative,
                                                      const std::string& remote = "") {
  ASSIGN_OR_RETURN(const std::string text, d.FetchText(relative, remote));
  return ParseChecklist(text, relative);
}

// Every file to fetch, with its checklist's MD5; the small files (license,
// policy, checklists) are fetched on the way, as download.sh does
// (llama-stack fetches only the model's folder).
absl::StatusOr<std::vector<FetchJob>> ListFiles(FileFetcher& d, const std::vector<MetaModel>& models) {
  const MetaChannel channel = models[0].channel;
  if (channel != MetaChannel::kLlamaStack) {
    for (const std::string name : {"LICENSE", channel == MetaChannel::kLlama2Script ? "USE_POLICY.md" : "USE_POLICY"}) {
      RETURN_IF_ERROR(d.FetchText(name).status());
    }
  }
  std::vector<FetchJob> jobs;
  if (channel == MetaChannel::kLlama2Script) {  // One tokenizer for every model; Llama 3 has one per model folder.
    ASSIGN_OR_RETURN(const std::vector<ChecklistEntry> tokenizer_checklist, Checklist(d, "tokenizer_checklist.chk"));
    for (const ChecklistEntry& e : tokenizer_checklist) jobs.push_back({e.file, e.md5, 0, ""});
  }
  for (const MetaModel& model : models) {
    const auto remote = [&](const std::string& file) {
      return model.remote_folder.empty() ? "" : model.remote_folder + "/" + file;
    };
    ASSIGN_OR_RETURN(const std::vector<ChecklistEntry> checklist,
                     Checklist(d, model.folder + "/checklist.chk", remote("checklist.chk")));
    std::map<std::string, std::string> md5;
    for (const ChecklistEntry& e : checklist) md5[e.file] = e.md5;
    std::vector<std::string> files = {"params.json"};
    if (model.llama_version == 3) files.push_back("tokenizer.model");
    for (int s = 0; s < model.shards; ++s) files.push_back(absl::StrFormat("consolidated.%02d.pth", s));
    for (const std::string& file : files) {
      if (md5.count(file) == 0) {
        return absl::InvalidArgumentError(absl::StrFormat("%s/checklist.chk has no entry for %s", model.folder, file));
      }
      jobs.push_back({model.folder + "/" + file, md5[file], 0, remote(file)});
    }
  }
  return jobs;
}

// The jobs still to fetch, sized (what is complete goes to the report's
// skipped; a wrong or truncated file is removed), once the disk is known to
// hold them; `needed` is the bytes they add.
absl::StatusOr<std::vector<FetchJob>> PendingJobs(FileFetcher& d, std::vector<FetchJob> jobs,
                                                  const std::string& target_dir, DownloadReport& report,
                                                  uint64_t& needed) {
  std::error_code error;
  std::vector<FetchJob> pending;
  needed = 0;
  for (FetchJob& job : jobs) {
    const std::string final_path = (fs::path(target_dir) / job.relative).string();
    if (fs::exists(final_path)) {
      absl::StatusOr<std::string> md5 = Md5File(final_path);
      if (md5.ok() && *md5 == job.md5) {
        report.skipped.push_back(job.relative);
        continue;
      }
      fs::remove(final_path, error);  // Wrong or truncated: fetch again.
    }
    ASSIGN_OR_RETURN(job.size, d.RemoteSize(job.url_path()));
    const uint64_t have = fs::exists(final_path + ".partial") ? fs::file_size(final_path + ".partial", error) : 0;
    needed += job.size > have ? job.size - have : 0;
    pending.push_back(job);
  }
  const uint64_t free_bytes = FreeBytes(target_dir);
  if (needed > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat("the download needs %s more in %s but only %s is free",
                                                        HumanBytes(needed), target_dir, HumanBytes(free_bytes)));
  }
  return pending;
}

// The big files, `connections` at a time, with one progress bar naming the
// files in flight; the first failure stops new fetches.
absl::Status FetchAll(FileFetcher& d, const std::vector<FetchJob>& pending, uint64_t needed,
                      const DownloadOptions& options, DownloadReport& report) {
  ProgressBar progress(absl::StrFormat("download %zu file(s)", pending.size()), needed,
                       options.show_progress ? stderr : nullptr);
  std::mutex mutex;
  // Per-file progress for the files in flight: relative path -> (done, size).
  std::map<std::string, std::pair<uint64_t, uint64_t>> in_flight;
  const auto describe = [&] {
    std::vector<std::string> parts;
    for (const auto& [name, counts] : in_flight) {
      parts.push_back(counts.second > 0 ? absl::StrFormat("%s %.0f%%", fs::path(name).filename().string(),
                                                          100.0 * counts.first / counts.second)
                                        : fs::path(name).filename().string());
    }
    return absl::StrJoin(parts, ", ");
  };
  size_t next = 0;
  std::vector<absl::Status> failures;
  const auto fetch_one = [&](const FetchJob& job) {
    uint64_t fetched = 0;
    absl::Status s = d.FetchFile(
        job,
        [&](uint64_t n) {
          std::lock_guard<std::mutex> lock(mutex);
          in_flight[job.relative].first += n;
          progress.set_detail(describe());
          progress.Add(n);
        },
        &fetched);
    std::lock_guard<std::mutex> lock(mutex);
    in_flight.erase(job.relative);
    report.bytes_fetched += fetched;
    if (!s.ok()) {
      failures.push_back(s);
      return;
    }
    report.fetched.push_back(job.relative);
    progress.Note(absl::StrFormat("downloaded %s (%s), MD5 matches", job.relative, HumanBytes(job.size)));
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < std::max(1, options.connections); ++c) {
    threads.emplace_back([&] {
      while (true) {
        FetchJob job;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (next >= pending.size() || !failures.empty()) return;
          job = pending[next++];
          in_flight[job.relative] = {0, job.size};
        }
        fetch_one(job);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  progress.Finish();
  if (failures.empty()) return absl::OkStatus();
  std::vector<std::string> messages;
  for (const absl::Status& s : failures) messages.push_back(d.redact()(s.message()));
  return absl::Status(failures[0].code(), absl::StrJoin(messages, "; "));
}

// Lists, checks and fetches every file of `models` into options.target_dir.
absl::StatusOr<DownloadReport> FetchModels(const DownloadOptions& options, const std::vector<MetaModel>& models) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  FileFetcher d(options);
  DownloadReport report;
  ASSIGN_OR_RETURN(std::vector<FetchJob> jobs, ListFiles(d, models));
  uint64_t needed = 0;
  ASSIGN_OR_RETURN(const std::vector<FetchJob> pending,
                   PendingJobs(d, std::move(jobs), options.target_dir, report, needed));
  RETURN_IF_ERROR(FetchAll(d, pending, needed, options, report));
  return report;
}

absl::StatusOr<DownloadReport> Download(const DownloadOptions& options, const UrlRedactor& redact) {
  RETURN_IF_ERROR(CheckUrlTemplate(options.url_template, redact));
  ASSIGN_OR_RETURN(const std::vector<MetaModel> models, LookUpMetaModels(options.models));
  std::error_code error;
  const bool existed = fs::exists(options.target_dir, error);
  fs::create_directories(options.target_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrFormat("--target_dir \"%s\": cannot create: %s", options.target_dir, error.message()));
  }
  absl::StatusOr<DownloadReport> report = FetchModels(options, models);
  // No empty model folder left to look like a download (a refused model).
  if (!report.ok()) RemoveEmptyFolders(options.target_dir, /*root_too=*/!existed);
  return report;
}

}  // namespace

absl::StatusOr<DownloadReport> DownloadMetaCheckpoints(const DownloadOptions& options) {
  // Every error passes the redactor once more, whichever path made it.
  const UrlRedactor redact(options.url_template);
  absl::StatusOr<DownloadReport> report = Download(options, redact);
  if (report.ok()) return report;
  return absl::Status(report.status().code(), redact(report.status().message()));
}

}  // namespace llama
