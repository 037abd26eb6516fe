// gpud's entry point: hands argv to the CLI.
#include "app/cli.h"

int main(int argc, char** argv) { return gpud::app::run_cli(argc, argv); }
