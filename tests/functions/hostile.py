"""A composition function written with crossplane-function-sdk-python 0.15.1 that misbehaves
on purpose, for tests/runner_hostile.rs.

Run with the SDK's standard flags (--insecure, --address, --tls-certs-dir, --max-send-message-size,
...) and --behaviour, what it does with a call unless the step's input names another
(`input: {behaviour: ok}`), so one process can be hostile and then normal:

- ok: composes one Bucket from the XR's spec.size, as a normal function does;
- sleep: sleeps an hour, past any deadline;
- huge: composes five resources of 1 MiB of text each (5 MiB: start it with
  --max-send-message-size 16, or gRPC refuses to send it);
- many: composes one resource holding 300,000 small numbers (about 1.2 MB on the wire);
- fatal: answers a SEVERITY_FATAL result, as a function refusing its input does;
- crash: exits the process mid-call (os._exit), the connection closed under the client.
"""

import asyncio
import os

import click
import grpc

from crossplane.function import cli as sdkcli
from crossplane.function import logging, resource, response, runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

BEHAVIOURS = ("ok", "sleep", "huge", "many", "fatal", "crash")


class Runner(grpcv1.FunctionRunnerServiceServicer):
    """The function: behaves as --behaviour says, or as the input's `behaviour` does."""

    def __init__(self, behaviour: str):
        self.behaviour = behaviour

    async def RunFunction(  # noqa: N802  # gRPC's name.
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        behaviour = self.behaviour
        if "behaviour" in req.input:
            behaviour = req.input["behaviour"]
        if behaviour == "sleep":
            await asyncio.sleep(3600)
        elif behaviour == "crash":
            os._exit(1)
        elif behaviour == "fatal":
            response.fatal(rsp, "the input is wrong: behaviour fatal")
        elif behaviour == "huge":
            for i in range(5):
                resource.update(
                    rsp.desired.resources[f"blob-{i}"],
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "data": {"blob": "x" * (1024 * 1024)},
                    },
                )
        elif behaviour == "many":
            resource.update(
                rsp.desired.resources["many"],
                {"apiVersion": "v1", "kind": "List", "items": [1] * 300_000},
            )
        else:
            xr = resource.struct_to_dict(req.observed.composite.resource)
            resource.update(
                rsp.desired.resources["bucket"],
                {
                    "apiVersion": "s3.example.org/v1",
                    "kind": "Bucket",
                    "spec": {"size": xr["spec"]["size"], "ratio": 0.5},
                },
            )
        return rsp


@click.command()
@sdkcli.standard_options
@click.option("--behaviour", type=click.Choice(BEHAVIOURS), default="ok")
def main(behaviour, debug, address, tls_certs_dir, insecure, max_recv_message_size,
         max_send_message_size):
    """sdkcli.run's body, with one more gRPC option: no SO_REUSEPORT, so a port another
    process listens on is a failure to bind (the test then picks another), not a port shared
    with it."""
    logging.configure(level=logging.Level.DEBUG if debug else logging.Level.INFO)
    if max_send_message_size is None:
        max_send_message_size = max_recv_message_size
    runtime.serve(
        Runner(behaviour),
        address,
        creds=runtime.load_credentials(tls_certs_dir),
        insecure=insecure,
        options=[
            ("grpc.max_receive_message_length", max_recv_message_size * 1024 * 1024),
            ("grpc.max_send_message_length", max_send_message_size * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
    )


if __name__ == "__main__":
    main()
