# JupyterLab settings for the Hugging Face Space, loaded by space/start.sh
# (`make lab LAB_ARGS="--config=space/jupyter_server_config.py ..."`).
#
# The token is not set here: jupyter_server reads it from the JUPYTER_TOKEN environment variable,
# which the Space takes from its secrets. The Space shows JupyterLab in an iframe on
# huggingface.co, behind Hugging Face's HTTPS proxy; the settings below are what that needs.
c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

# Requests arrive through the proxy with the Space's public host name, not localhost.
c.ServerApp.allow_remote_access = True
c.ServerApp.trust_xheaders = True
# Allow the page to be framed by the Space page on huggingface.co (and by itself), nobody else.
c.ServerApp.tornado_settings = {
    "headers": {"Content-Security-Policy": "frame-ancestors 'self' https://huggingface.co"},
    # The XSRF cookie must reach the server from inside the cross-site iframe too; XSRF checks stay on.
    "xsrf_cookie_kwargs": {"path": "/", "samesite": "None", "secure": True},
}
# The login cookie likewise (cross-site iframe: SameSite=None, which browsers accept only when Secure).
c.IdentityProvider.cookie_options = {"samesite": "None", "secure": True}
# No calls to the outside world from the server: no news feed, no update check.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
