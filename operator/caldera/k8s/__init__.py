"""The only package that talks to the Kubernetes API: JSON requests and watches (``rest``),
credentials (``client``), the Lease (``lease``), start-up checks (``preflight``), and the HTTP
endpoints the kubelet and Prometheus call (``endpoints``)."""
