from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from core.throttle import login_blocked_for


class LoginForm(AuthenticationForm):
    """Django's login form, refusing without checking the password while the address, or the account from this
    address, is throttled."""

    throttled = False

    def clean(self):
        blocked = login_blocked_for(self.request, self.cleaned_data.get("username"))
        if blocked:
            self.throttled = True
            raise ValidationError(
                f"Too many failed logins. Try again in {max(1, blocked // 60)} minutes.", code="throttled"
            )
        return super().clean()


class FirstAccountForm(UserCreationForm):
    email = forms.EmailField(required=False)

    class Meta:
        model = User
        fields = ("username", "email")


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="my token")
