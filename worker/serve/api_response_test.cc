#include "worker/serve/api_response.h"

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(ApiResponseTest, JsonResponseKeepsStatusBodyAndHeaders) {
  const http::Response r = JsonResponse(201, "{}", {{"X-A", "b"}});
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, "{}");
  EXPECT_THAT(r.headers, ElementsAre(Pair("X-A", "b")));
}

TEST(ApiResponseTest, OnlyBusyErrorsSayRetryAfter) {
  for (int status : {429, 503}) {
    const http::Response r = ErrorResponse({status, "busy", "server_error", "", ""});
    EXPECT_EQ(r.status, status);
    EXPECT_THAT(r.headers, ElementsAre(Pair("Retry-After", "1")));
  }
  for (int status : {400, 401, 404, 500}) {
    EXPECT_THAT(ErrorResponse({status, "no", "invalid_request_error", "", ""}).headers, IsEmpty());
  }
}

TEST(ApiResponseTest, ErrorResponseCarriesTheErrorObject) {
  const ApiError error{400, "n: expected an integer", "invalid_request_error", "n", ""};
  const http::Response r = ErrorResponse(error);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, error.Json());
}

TEST(ApiResponseTest, SseIsOneDataLineAndABlankLine) {
  EXPECT_EQ(Sse(nlohmann::json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(ApiResponseTest, UnixSecondsIsNow) {
  const int64_t before = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const int64_t now = UnixSeconds();
  EXPECT_GE(now, before);
  EXPECT_LE(now, before + 5);
}

}  // namespace
}  // namespace llama
