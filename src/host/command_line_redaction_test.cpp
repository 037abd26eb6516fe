#include "host/command_line_redaction.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

using Args = std::vector<std::string>;
const std::string R(kRedacted);

TEST(SecretName, SecretWordsWhereverTheyStandAndNotInsideOthers) {
  for (const char* n : {"hf-token",
                        "HF_TOKEN",
                        "db-password",
                        "DB_PASSWORD",
                        "api-key",
                        "apiKey",
                        "API_KEY",
                        "aws_secret_access_key",
                        "AWS_SECRET_ACCESS_KEY",
                        "AWS_SESSION_TOKEN",
                        "token",
                        "secret",
                        "passwd",
                        "credential",
                        "credentials",
                        "google.credentials",
                        "client-secret",
                        "hftoken",
                        "dbpassword",
                        "x.apikey",
                        "Authorization",
                        "auth",
                        "ssh-passphrase",
                        "wandb_api_key"})
    EXPECT_TRUE(secret_name(n)) << n;
  for (const char* n : {"max-new-tokens", "max_tokens", "tokenizer", "keyboard", "monkey", "model",
                        "batch-size", "data-path", "PATH", "nproc_per_node", "", "-", "lr"})
    EXPECT_FALSE(secret_name(n)) << n;
}

TEST(RedactCommandLine, ValueAfterASecretFlag) {
  EXPECT_EQ(redact_command_line({"python", "train.py", "--hf-token", "hf_abc", "--epochs", "3"}),
            (Args{"python", "train.py", "--hf-token", R, "--epochs", "3"}));
  EXPECT_EQ(redact_command_line({"app", "--db-password=hunter2", "--db-host=db"}),
            (Args{"app", "--db-password=" + R, "--db-host=db"}));
  EXPECT_EQ(redact_command_line({"app", "-api_key", "k1", "-token=t1", "--secret", "-s3cr3t"}),
            (Args{"app", "-api_key", R, "-token=" + R, "--secret", R}));
  // A flag after a secret flag is a flag, not its value; an empty value stays empty.
  EXPECT_EQ(redact_command_line({"app", "--use-token", "--verbose", "--password="}),
            (Args{"app", "--use-token", "--verbose", "--password="}));
  // The last argument: nothing follows.
  EXPECT_EQ(redact_command_line({"app", "--password"}), (Args{"app", "--password"}));
  // Ordinary flags keep their values.
  EXPECT_EQ(redact_command_line({"torchrun", "--nproc_per_node", "8", "--max-new-tokens=512"}),
            (Args{"torchrun", "--nproc_per_node", "8", "--max-new-tokens=512"}));
}

TEST(RedactCommandLine, EnvironmentAssignments) {
  EXPECT_EQ(
      redact_command_line({"env", "AWS_SECRET_ACCESS_KEY=wJalr/K7MDENG", "AWS_REGION=us-east-1",
                           "python", "x.py", "db.password=p", "model.name=llama"}),
      (Args{"env", "AWS_SECRET_ACCESS_KEY=" + R, "AWS_REGION=us-east-1", "python", "x.py",
            "db.password=" + R, "model.name=llama"}));
}

TEST(RedactCommandLine, PasswordsInUrls) {
  EXPECT_EQ(redact_command_line({"app", "postgres://svc:p@ss/w0rd@db.internal:5432/jobs"}),
            (Args{"app", "postgres://svc:" + R + "@db.internal:5432/jobs"}));
  EXPECT_EQ(redact_command_line({"app", "--db-url=mysql://root:pw@10.0.0.1/db"}),
            (Args{"app", "--db-url=mysql://root:" + R + "@10.0.0.1/db"}));
  // No password, no user information: unchanged.
  EXPECT_EQ(redact_command_line({"git", "clone", "https://user@host/r", "https://host:8443/x"}),
            (Args{"git", "clone", "https://user@host/r", "https://host:8443/x"}));
}

TEST(RedactCommandLine, HeadersAndShellScripts) {
  EXPECT_EQ(redact_command_line({"curl", "-H", "Authorization: Bearer eyJhbGci", "-H",
                                 "X-Api-Key:abc", "-H", "Accept: text/plain"}),
            (Args{"curl", "-H", "Authorization: " + R + " " + R, "-H", "X-Api-Key:" + R, "-H",
                  "Accept: text/plain"}));
  EXPECT_EQ(redact_command_line({"sh", "-c",
                                 "HF_TOKEN=abc  python train.py --hf-token abc\t--wandb-key=k "
                                 "--epochs 3"}),
            (Args{"sh", "-c",
                  "HF_TOKEN=" + R + "  python train.py --hf-token " + R + "\t--wandb-key=" + R +
                      " --epochs 3"}));
  // A secret flag's value holding spaces is redacted whole.
  EXPECT_EQ(redact_command_line({"app", "--passphrase", "correct horse battery"}),
            (Args{"app", "--passphrase", R}));
}

TEST(RedactCommandLine, OddInputIsKeptNotFatal) {
  EXPECT_EQ(redact_command_line({}), Args{});
  EXPECT_EQ(redact_command_line({"", "-", "--", "=", ":", "://", "a://@", " ", "=x"}),
            (Args{"", "-", "--", "=", ":", "://", "a://@", " ", "=x"}));
}

}  // namespace
}  // namespace gpud::host
