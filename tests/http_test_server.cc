#include "tests/http_test_server.h"

#include <sys/socket.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace llama::testing {
namespace {

constexpr auto kIo = std::chrono::seconds(30);

bool SendText(const net::Socket& s, const std::string& text) {
  return net::SendAll(s, text.data(), text.size(), net::After(kIo), "client").ok();
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 416: return "Range Not Satisfiable";
    default: return "Internal Server Error";
  }
}

}  // namespace

HttpTestServer::HttpTestServer(net::Socket listener, int port, std::string root, std::string prefix, std::string query)
    : listener_(std::move(listener)), port_(port), root_(std::move(root)), prefix_(std::move(prefix)), query_(std::move(query)) {
  accept_thread_ = std::thread([this] {
    while (!stopping_) {
      absl::StatusOr<net::Socket> client = net::Accept(listener_, net::After(std::chrono::milliseconds(100)));
      if (!client.ok()) continue;
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.emplace_back([this, c = std::make_shared<net::Socket>(*std::move(client))]() mutable { Serve(std::move(*c)); });
    }
  });
}

absl::StatusOr<std::unique_ptr<HttpTestServer>> HttpTestServer::Start(std::string root, std::string prefix,
                                                                      std::string query) {
  absl::StatusOr<net::Socket> listener = net::Listen("127.0.0.1", 0);
  if (!listener.ok()) return listener.status();
  const int port = *net::LocalPort(*listener);
  return std::unique_ptr<HttpTestServer>(
      new HttpTestServer(*std::move(listener), port, std::move(root), std::move(prefix), std::move(query)));
}

HttpTestServer::~HttpTestServer() {
  stopping_ = true;
  accept_thread_.join();
  for (std::thread& t : threads_) t.join();
}

std::string HttpTestServer::UrlTemplate() const {
  return absl::StrFormat("http://127.0.0.1:%d/%s/*?%s", port_, prefix_, query_);
}

void HttpTestServer::SetFault(const std::string& path, Fault fault) {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_[path] = std::move(fault);
}

int64_t HttpTestServer::BytesServed(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  return served_[path];
}

int HttpTestServer::Requests(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_[path];
}

void HttpTestServer::Serve(net::Socket client) {
  // Read the request head.
  std::string head;
  char c;
  while (head.size() < 16384 && !absl::EndsWith(head, "\r\n\r\n")) {
    if (!net::RecvAll(client, &c, 1, net::After(kIo), "client").ok()) return;
    head.push_back(c);
  }
  const std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  const std::vector<std::string> request = absl::StrSplit(lines[0], ' ');
  if (request.size() != 3 || request[0] != "GET") {
    SendText(client, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return;
  }
  int64_t range_start = -1, range_end = -1;
  for (const std::string& line : lines) {
    if (absl::StartsWithIgnoreCase(line, "range: bytes=")) {
      const std::vector<std::string> bounds = absl::StrSplit(line.substr(13), '-');
      if (bounds.size() == 2 && absl::SimpleAtoi(bounds[0], &range_start) && !bounds[1].empty()) {
        absl::SimpleAtoi(bounds[1], &range_end);
      }
    }
  }
  const std::string& target = request[1];
  const size_t question = target.find('?');
  const std::string path = target.substr(0, question);
  const std::string query = question == std::string::npos ? "" : target.substr(question + 1);
  const std::string expected_prefix = "/" + prefix_ + "/";
  const auto respond = [&](int status, const std::string& body, const std::string& type = "text/plain") {
    SendText(client, absl::StrFormat("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
                                     status, Reason(status), type, body.size(), body));
  };
  const std::string relative =
      absl::StartsWith(path, expected_prefix) ? path.substr(expected_prefix.size()) : path.substr(1);
  // One-byte probes (a client sizing the file) leave one-time faults for the transfer.
  const bool probe = range_start == 0 && range_end == 0;
  Fault fault;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[relative];
    Fault& stored = faults_[relative];
    fault = stored;
    if (!stored.statuses_first.empty()) stored.statuses_first.erase(stored.statuses_first.begin());
    if (!probe) {
      stored.drop_after_bytes_once = -1;
      stored.corrupt_offset_once = -1;
    }
  }
  if (!absl::StartsWith(path, expected_prefix) || query != query_) {
    return respond(403, "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>", "application/xml");
  }
  if (fault.always_status != 0) return respond(fault.always_status, "denied");
  if (!fault.statuses_first.empty()) return respond(fault.statuses_first.front(), "try again");
  if (fault.html_instead) return respond(200, "<!DOCTYPE html><html><body>Sign in</body></html>", "text/html");
  std::ifstream file(root_ + "/" + relative, std::ios::binary);
  if (relative.find("..") != std::string::npos || !file) return respond(404, "not found");
  file.seekg(0, std::ios::end);
  const int64_t size = file.tellg();
  int64_t begin = 0, end = size - 1;
  int status = 200;
  if (range_start >= 0 && !fault.ignore_range) {
    if (range_start >= size) return respond(416, "");
    begin = range_start;
    if (range_end >= 0) end = std::min(range_end, size - 1);
    status = 206;
  }
  std::string header = absl::StrFormat("HTTP/1.1 %d %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n",
                                       status, Reason(status), end - begin + 1);
  if (status == 206) absl::StrAppendFormat(&header, "Content-Range: bytes %d-%d/%d\r\n", begin, end, size);
  header += "Connection: close\r\n\r\n";
  if (!SendText(client, header)) return;
  if (fault.stall_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(fault.stall_ms));
  file.seekg(begin);
  std::vector<char> buffer(1 << 20);
  int64_t position = begin, sent = 0;
  const auto body_start = std::chrono::steady_clock::now();
  while (position <= end) {
    if (fault.bytes_per_second > 0) {
      std::this_thread::sleep_until(body_start + std::chrono::microseconds(sent * 1000000 / fault.bytes_per_second));
    }
    const int64_t n = std::min<int64_t>(buffer.size(), end - position + 1);
    file.read(buffer.data(), n);
    if (fault.corrupt_offset_once >= position && fault.corrupt_offset_once < position + n) {
      buffer[fault.corrupt_offset_once - position] ^= 0x5A;
    }
    int64_t allowed = n;
    if (fault.drop_after_bytes_once >= 0) allowed = std::min<int64_t>(n, fault.drop_after_bytes_once - sent);
    if (allowed > 0 && !net::SendAll(client, buffer.data(), allowed, net::After(kIo), "client").ok()) break;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      served_[relative] += std::max<int64_t>(allowed, 0);
    }
    sent += allowed;
    position += allowed;
    if (allowed < n) {  // Drop: reset the connection mid-body.
      ::shutdown(client.fd(), SHUT_RDWR);
      return;
    }
  }
}

}  // namespace llama::testing
