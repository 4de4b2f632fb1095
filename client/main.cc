// hetbench: the command line client.
#include <iostream>

#include "client/cli.h"

int main(int argc, char** argv) { return hetbench::client::RunCli(argc, argv, std::cout, std::cerr); }
