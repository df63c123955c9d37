#include "commands.h"
#include "core/net.h"
#include "embedding_flags.h"
#include "ferry/http/server.h"
#include "until_signal.h"
#include "xfer/store/sizes.h"

namespace ferry::app {

void register_http(CLI::App& app, GeneralFlags& general, Command& command) {
  static http::HttpOptions o;
  static std::string backend = "cpu";
  static std::string launch = "persistent";
  static std::string max_body = "64KiB";
  static std::string max_chunk_framing = "128KiB";
  static std::string max_file = "64MiB";
  static std::string max_output = "64MiB";
  static bool no_pin = false;
  static EmbeddingFlags embedding;
  CLI::App* sub = app.add_subcommand(
      "http",
      "HTTP/1.1 server: the proxy threads find where each request ends; workers (CPU threads or a GPU launch "
      "method) parse, validate and route it and write the response head. Serves /index.html, /contacts.html, "
      "the files under --root, /health and /metrics (Prometheus); GET and HEAD. With --model, embeddings too: "
      "GET /inference?d=TEXT (GAZSI), POST /embed, /embed_all, /tokenize and /decode (TEI), POST /v1/embeddings "
      "and GET /v1/models (OpenAI), GET /info, dynamically batched on the GPU or the CPU.");
  add_general_flags(*sub, general);
  sub->add_option("-p,--port", o.port, "TCP port to listen on (0 picks a free one)")->capture_default_str();
  sub->add_option("--listen-address", o.listen_address, "IPv4 address to listen on")->capture_default_str();
  sub->add_option("--cpu", o.cpus, "Core of a proxy thread; repeat or comma-separate for more (each gets a worker)")
      ->required()
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--backend", backend, "Workers: cpu threads, or cuda (a GPU launch method)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--launch", launch, "cuda launch method: persistent, burst, graph or memops")
      ->check(CLI::IsMember({"persistent", "burst", "graph", "memops"}))
      ->capture_default_str();
  sub->add_option("--worker-threads", o.worker.threads,
                  "cpu backend: worker threads, each serving proxy threads' channels in turn; 0 = one per --cpu")
      ->capture_default_str();
  sub->add_option("--worker-cpu", o.worker.cpus, "cpu backend: cores to pin worker threads to (comma-separated)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("-g,--gpu", o.worker.gpu, "cuda backend: GPU PCI address or device index (default 0)");
  sub->add_option("--burst", o.worker.burst, "burst/graph/memops: most requests per launch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--root", o.root, "Also serve every regular file under this directory (loaded at start)");
  sub->add_option("--max-file-size", max_file, "Largest file --root may hold, e.g. 64MiB")->capture_default_str();
  sub->add_option("--max-request-line", o.max_request_line, "Longest request line in bytes (414 beyond)")
      ->capture_default_str();
  sub->add_option("--max-head", o.max_head,
                  "Largest request head (request line and fields) in bytes (431 beyond)")
      ->check(at_least(1024))
      ->capture_default_str();
  sub->add_option("--max-body", max_body, "Largest request body, e.g. 64KiB (413 beyond); a chunked body's decoded data")
      ->capture_default_str();
  sub->add_option("--max-chunk-framing", max_chunk_framing,
                  "Most bytes of a chunked body's framing: chunk-size lines, extensions, line ends and trailers "
                  "(413 beyond); each connection's input buffer holds --max-head, --max-body and this")
      ->capture_default_str();
  sub->add_option("--max-connections-per-thread", o.max_connections_per_thread,
                  "Connections one proxy thread serves; beyond, clients get a 503")
      ->capture_default_str();
  sub->add_option("--max-pipelined", o.max_pipelined,
                  "Requests one connection may have in flight; reading it stops at the limit")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--max-output-per-thread", max_output,
                  "Response copies one proxy thread may hold for clients that have not read them, e.g. 64MiB "
                  "(pages go uncopied); beyond, only connections that owe nothing are read")
      ->capture_default_str();
  sub->add_option("--header-timeout", o.header_timeout_s,
                  "Seconds a begun request may take to arrive whole (slow clients get a 408); 0: none")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub->add_option("--idle-timeout", o.idle_timeout_s, "Seconds a keep-alive connection may stay idle; 0: forever")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub->add_option("--port-file", o.port_file, "Write the bound port to this file once serving");
  sub->add_option("--access-log", o.access_log,
                  "Append a line per response in the common log format to this file ('-': stdout); off by default");
  sub->add_flag("--no-pin", no_pin, "Do not pin proxy threads to their --cpu cores");
  sub->add_option("--api-key", o.api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health and /metrics (401 otherwise), as "
                  "TEI's --api-key; read from $API_KEY when not given, to keep it off the command line")
      ->envname("API_KEY");
  sub->add_option("--max-client-batch", o.max_client_batch, "Inputs one embedding request may carry (413 beyond)")
      ->capture_default_str();
  add_embedding_flags(*sub, embedding);
  sub->callback([&command] {
    command.role = "http";
    command.run = [] {
      o.pin_threads = !no_pin;
      o.max_body = xfer::store::parse_size(max_body, "--max-body");
      o.max_chunk_framing = xfer::store::parse_size(max_chunk_framing, "--max-chunk-framing");
      o.max_file_bytes = xfer::store::parse_size(max_file, "--max-file-size");
      o.max_output_per_thread = xfer::store::parse_size(max_output, "--max-output-per-thread");
      o.worker.backend = worker::parse_backend(backend);
      o.worker.launch = o.worker.backend == worker::BackendKind::Cpu ? worker::LaunchMethod::Cpu
                                                                      : worker::parse_launch(launch);
      SignalFd signals;  // first: every thread made after it has the signals blocked
      o.embedding = make_embedding_service(embedding, o.worker.backend == worker::BackendKind::Cuda);
      http::HttpServer server(o);
      net::raise_fd_limit();
      server.start();
      log::app().info("serving http on {}:{} ({} proxy thread(s), {} workers{}); {} page(s)", o.listen_address,
                      server.port(), o.cpus.size(), backend, backend == "cuda" ? ", " + launch : "",
                      server.pages().size());
      return run_until_signal(server, signals, "http");
    };
  });
}

}  // namespace ferry::app
